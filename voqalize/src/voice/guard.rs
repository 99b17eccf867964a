//! The leak guard: screens the text of one model response before it is spoken, so that a
//! function call the model wrote out as words (`default_api:read_screen()`,
//! `{"name": "open_booking", …}`, a ```` ```tool_code ```` fence) is never read aloud.
//!
//! Two screens run, one after the other:
//!
//! * **The opening.** Until the first pieces of a response show whether it is speech or a call
//!   written as text ([`looks_like_call`]), they are held. Ordinary speech in any script is
//!   decided on its first piece and costs nothing; only an opening that could still grow into
//!   a call head (`Default`, `Tool`, `{`) waits for the next piece.
//! * **Speech under way.** Once the response is speech, each piece is searched for a narrower
//!   set of call markers (a code fence, a call tag, `certain_tool_call`, `default_api:` or
//!   `default_api.` at a word start, a JSON object whose first key names a call). Everything
//!   before a marker is spoken; nothing from it on is. The end of a piece that could still
//!   be the start of a marker (a *tail*, at most [`TAIL_SCAN`] characters) is held until the
//!   next piece decides it.
//!
//! All positions are counted in Unicode scalar values (chars), never bytes, and the text tests
//! (case folding, whitespace, word characters) are Unicode-aware.

mod opening;
mod released;
pub(crate) use opening::looks_like_call;
pub(crate) use released::Released;

use std::borrow::Cow;
use std::mem;

/// The keys that name a call when written text opens a JSON object, list, tag or quote.
const CALL_KEYS: [&str; 8] = [
    "name",
    "function",
    "tool",
    "call",
    "args",
    "arguments",
    "action",
    "parameters",
];

/// How a call written as text begins once speech is under way. Narrower than [`CALL_HEADS`](opening::CALL_HEADS) on
/// purpose: a sentence may well say "tool call" or even "default_api", and cutting there
/// would silence real speech; no sentence carries these forms. The JSON form (`{"name":`) is
/// matched separately, see [`json_call_at`].
const SPOKEN_HEADS: [&str; 7] = [
    "```",
    "<tool_call",
    "<tool_code",
    "<function_call",
    "certain_tool_call",
    "default_api:",
    "default_api.",
];

/// Characters where a held tail can start: the first characters of [`SPOKEN_HEADS`] and of a
/// JSON opening. Nothing in Devanagari or any other non-Latin script is here, so speech in
/// those scripts never holds anything back.
const TAIL_STARTS: [char; 7] = ['`', '<', '{', 'c', 'C', 'd', 'D'];

/// How far back from the end of the text a tail may start, in chars. A tail is never longer
/// than a spoken head, except for whitespace inside a JSON opening (`{   "na`); this caps the
/// hold even then.
pub(crate) const TAIL_SCAN: usize = 64;

/// The one-time note the next request carries after a call written as text or a malformed
/// finish. It goes on that single request and is never stored in the history, so the
/// conversation reads as if the model had answered well the first time; any words spoken
/// before the call are already in the history as the model's own, which is how it knows what
/// not to repeat.
pub(crate) const RETRY_NOTE: &str = "Nothing was executed: instead of using function calling, \
your previous response spelled a function call out as text, or it ended malformed. None of that \
text reached the user; they heard only what you said before it, if anything, which appears above \
as your reply. Now either make the call with function calling or reply in speech, without \
repeating what you have already said, and do not bring up this message.";

/// One response's text screen: feed it every text piece of the response in order
/// ([`release`](Self::release)), then tell it how the response ended
/// ([`settle`](Self::settle)); speak exactly the pieces it returns.
///
/// What it releases borrows the piece it was given wherever it can: speech under way with no
/// tail held goes out as the piece itself, so screening copies no text. Only what it holds back
/// (an undecided opening, a tail) is copied, and that is short. It keeps no record of what was
/// said: the session's unit book is that record.
#[derive(Debug, Default)]
pub(crate) struct Guard {
    /// Opening pieces not yet released, while the opening is undecided.
    held: Vec<String>,
    /// `None` while undecided, `Some(false)` once speech, `Some(true)` once a call written as
    /// text was seen (from the opening or after speech began); nothing more is spoken then.
    leaked: Option<bool>,
    /// The response ended because its output did not parse.
    malformed: bool,
    /// The end of speech under way that could still start a call marker (`default`, `{"na`,
    /// one backtick); at most [`TAIL_SCAN`] chars.
    tail: String,
    /// The last char released, so a letter marker is recognised only at a word start even
    /// across pieces.
    last: Option<char>,
    /// The chars being screened (the last char, the tail, the piece), kept between pieces so
    /// screening allocates nothing once it has grown to the longest piece.
    scratch: Vec<char>,
    /// The same when all of them are ASCII, as bytes: most speech is, and copying bytes costs
    /// less than decoding each char.
    ascii_scratch: Vec<u8>,
}

impl Guard {
    /// A screen for a response that has produced no text yet.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// A text piece arrived; returns the pieces to speak now, in order.
    ///
    /// While the opening is undecided the piece is held; the piece that decides it as speech
    /// releases every held piece as it arrived (boundaries kept). Once speech, the piece is
    /// released less anything from a call marker on and less a tail that could still become
    /// one; a tail held from the previous piece goes out first, as its own piece. After a
    /// call written as text, nothing is released.
    pub(crate) fn release<'a>(&mut self, piece: &'a str) -> Released<'a> {
        let mut out = Released::new();
        match self.leaked {
            Some(true) => {}
            Some(false) => self.scan(piece, &mut out),
            None => {
                self.leaked = if self.held.is_empty() {
                    looks_like_call(piece)
                } else {
                    looks_like_call(&(self.held.concat() + piece))
                };
                if self.leaked == Some(false) {
                    self.release_held(&mut out);
                    // Screened in place: the usual opening, decided on its own, is not copied.
                    self.scan(piece, &mut out);
                } else {
                    self.held.push(piece.to_owned());
                }
            }
        }
        out
    }

    /// The response finished (`malformed` = it ended because its output did not parse), or the
    /// stream ended without a finish (`malformed = false`); returns what may still be spoken.
    ///
    /// The model has stopped writing, so an opening still undecided is speech and a held tail
    /// is not the start of a call: both are released. A malformed finish speaks nothing more:
    /// it never releases the tail, and with the opening still undecided it counts as a call
    /// written as text (the call the model tried to make never ran).
    pub(crate) fn settle(&mut self, malformed: bool) -> Released<'static> {
        self.malformed = malformed;
        if malformed && self.leaked.is_none() {
            self.leaked = Some(true);
            self.held.clear();
        }
        if malformed {
            self.tail.clear();
            return Released::new();
        }
        self.release_holdings()
    }

    /// A real call part arrived: what is held in case it began a call written as text (an
    /// undecided opening, a tail) is released now, before the tool runs — as [`settle`] would
    /// release it at the finish, only in time. An opening already seen to be a call written as
    /// text (a code fence in front of the call) stays unspoken.
    ///
    /// [`settle`]: Self::settle
    pub(crate) fn before_call(&mut self) -> Released<'static> {
        self.release_holdings()
    }

    /// `None` while undecided, `Some(false)` for speech, `Some(true)` once a call written as
    /// text was seen.
    pub(crate) fn leaked(&self) -> Option<bool> {
        self.leaked
    }

    /// The response ended malformed.
    pub(crate) fn malformed(&self) -> bool {
        self.malformed
    }

    /// An undecided opening or a tail is held back (text arrived that is not spoken yet, and
    /// may still be). What the guard's tests check after each piece.
    #[cfg(test)]
    pub(crate) fn is_holding(&self) -> bool {
        (self.leaked.is_none() && !self.held.is_empty()) || !self.tail.is_empty()
    }

    /// The model stopped writing text (it finished, or made a real call): an undecided opening
    /// is speech, and a held tail is not the start of a call.
    fn release_holdings(&mut self) -> Released<'static> {
        let mut out = Released::new();
        if self.leaked.is_none() {
            self.leaked = Some(false);
            self.release_held(&mut out);
        }
        let tail = mem::take(&mut self.tail);
        if !tail.is_empty() && self.leaked == Some(false) {
            self.last = tail.chars().last();
            out.push(Cow::Owned(tail));
        }
        out
    }

    /// The opening was decided as speech: every held piece is screened as speech, in order.
    fn release_held<'a>(&mut self, out: &mut Released<'a>) {
        for piece in mem::take(&mut self.held) {
            let mut released = Released::new();
            self.scan(&piece, &mut released);
            out.extend(released.into_iter().map(|p| Cow::Owned(p.into_owned())));
        }
    }

    /// Speech under way: releases `text` (after the held tail) less anything from a call
    /// marker on, and less the new tail that could still become one.
    ///
    /// The last char already spoken is put in front, so a letter marker is recognised only
    /// where it starts a word (`mydefault_api:` is not a call) even across pieces. What is
    /// released keeps the boundaries it arrived with: the old tail, then the new piece.
    fn scan<'a>(&mut self, text: &'a str, out: &mut Released<'a>) {
        if self.leaked == Some(true) {
            return;
        }
        let old_tail = mem::take(&mut self.tail);
        let start = usize::from(self.last.is_some());
        let ascii =
            self.last.is_none_or(|c| c.is_ascii()) && old_tail.is_ascii() && text.is_ascii();
        // A position in the screened text is a byte offset into ASCII text, else a char count.
        let offset = |s: &str, at: usize| if ascii { at } else { byte_at(s, at) };
        let split = start + old_tail.chars().count();
        let screened = if ascii {
            let full = &mut self.ascii_scratch;
            full.clear();
            // An ASCII char is its one byte.
            full.extend(self.last.map(|c| c as u8));
            full.extend_from_slice(old_tail.as_bytes());
            full.extend_from_slice(text.as_bytes());
            screen(full, start)
        } else {
            let full = &mut self.scratch;
            full.clear();
            full.extend(
                self.last
                    .into_iter()
                    .chain(old_tail.chars())
                    .chain(text.chars()),
            );
            screen(full, start)
        };
        let end = screened.end;
        match screened.tail {
            Some(tail) => self.tail = tail,
            None => self.leaked = Some(true),
        }
        if screened.last.is_some() {
            self.last = screened.last;
        }
        let from_tail = end.min(split).saturating_sub(start);
        if from_tail > 0 {
            let cut = offset(&old_tail, from_tail);
            out.push(Cow::Owned(if cut == old_tail.len() {
                old_tail
            } else {
                old_tail[..cut].to_owned()
            }));
        }
        if end > split {
            out.push(Cow::Borrowed(&text[..offset(text, end - split)]));
        }
    }
}

/// What screening speech under way found: where what may be spoken ends (a position in the
/// screened text), the tail to hold from there (`None` when a call marker starts there), and
/// the last char spoken (`None` when nothing is).
#[derive(Debug, PartialEq)]
struct Screened {
    end: usize,
    tail: Option<String>,
    last: Option<char>,
}

/// Screens `full` from `start` on (what comes before only tells whether a letter marker starts
/// a word): up to a call marker if one begins, else up to the tail that could still become one.
/// `full` is chars, or the bytes of text that is all ASCII.
fn screen<C: Unit>(full: &[C], start: usize) -> Screened {
    let (end, tail) = match find_spoken_call(full, start) {
        Some(hit) => (hit, None),
        None => {
            let end = tail_start(full, start);
            (end, Some(full[end..].iter().map(|&c| c.char()).collect()))
        }
    };
    let last = (end > start).then(|| full[end - 1].char());
    Screened { end, tail, last }
}

/// One unit of screened text: a char, or a byte of text that is all ASCII (where each byte is
/// a char), so the rules are written once and ASCII text is screened without decoding it.
trait Unit: Copy {
    fn char(self) -> char;
}

impl Unit for char {
    fn char(self) -> char {
        self
    }
}

impl Unit for u8 {
    fn char(self) -> char {
        char::from(self)
    }
}

/// The byte offset of the `chars`-th char of `text` (its length when it has no more).
fn byte_at(text: &str, chars: usize) -> usize {
    text.char_indices()
        .nth(chars)
        .map_or(text.len(), |(at, _)| at)
}

/// Whitespace wherever the rules skip it: Unicode `White_Space`, plus the four information
/// separators U+001C..U+001F, which act as line and field breaks.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// A word character (`\w`): a Unicode letter or number, or `_`. Combining marks (a
/// Devanagari vowel sign, Arabic harakat) and the circled letters are not word characters even
/// though Rust's `is_alphabetic` counts them: a marker glued right after `नमस्ते` (which ends in
/// a vowel sign) still starts a word, so it is cut rather than spoken.
fn is_word(c: char) -> bool {
    if c.is_ascii() {
        // No ASCII character is in `NOT_WORD`.
        return c.is_ascii_alphanumeric() || c == '_';
    }
    c.is_alphanumeric() && !is_other_alphabetic(c)
}

/// Whether `c` is in [`NOT_WORD`].
fn is_other_alphabetic(c: char) -> bool {
    let c = u32::from(c);
    let (ranges, _) = NOT_WORD.as_chunks::<2>();
    // The first range that ends at or after `c`; `c` is in it unless it starts past `c`.
    let i = ranges.partition_point(|&[_, end]| end < c);
    ranges.get(i).is_some_and(|&[start, _]| start <= c)
}

/// Whether `c` matches the pattern char `p` case-insensitively, the way a Unicode-aware
/// case-insensitive regex does: an ASCII letter also matches its other case and the
/// non-ASCII letters that fold to it (`İ`/`ı` for `i`, the Kelvin sign for `k`, `ſ` for `s`).
fn same_letter(c: char, p: char) -> bool {
    if !p.is_ascii_alphabetic() {
        return c == p;
    }
    c.eq_ignore_ascii_case(&p)
        || matches!(
            (p.to_ascii_lowercase(), c),
            ('i', '\u{130}' | '\u{131}') | ('k', '\u{212a}') | ('s', '\u{17f}')
        )
}

/// Whether `c` is a letter of a call key as a case-insensitive `[a-z]` sees it.
fn is_key_letter(c: char) -> bool {
    c.is_ascii_alphabetic() || matches!(c, '\u{130}' | '\u{131}' | '\u{17f}' | '\u{212a}')
}

/// The char at `at`, if the text is that long.
fn char_at<C: Unit>(text: &[C], at: usize) -> Option<char> {
    text.get(at).map(|&c| c.char())
}

/// Whether `text[at..]` starts with `pattern`, case-insensitively.
fn starts_with_at<C: Unit>(text: &[C], at: usize, pattern: &str) -> bool {
    pattern
        .chars()
        .enumerate()
        .all(|(k, p)| text.get(at + k).is_some_and(|&c| same_letter(c.char(), p)))
}

/// The first position at or after `from` where a call marker begins, if any. Chars before
/// `from` are only looked at to tell whether a letter marker starts a word.
fn find_spoken_call<C: Unit>(full: &[C], from: usize) -> Option<usize> {
    (from..full.len()).find(|&i| spoken_call_at(full, i))
}

/// Whether a call marker begins at `full[i]`: a code fence; `<tool_call`, `<tool_code` or
/// `<function_call`; `certain_tool_call`, `default_api:` or `default_api.` not preceded by a
/// word char; or a JSON object whose first key names a call.
fn spoken_call_at<C: Unit>(full: &[C], i: usize) -> bool {
    // Each marker has a first character of its own, so the one at `i` says which to try.
    match full[i].char() {
        '`' => starts_with_at(full, i, "```"),
        '<' => ["tool_call", "tool_code", "function_call"]
            .iter()
            .any(|tag| starts_with_at(full, i + 1, tag)),
        '{' => json_call_at(full, i),
        // Both letter markers have an `e` second (most words with a `c` or a `d` do not: they
        // are passed over here), and start a word.
        'c' | 'C' | 'd' | 'D' => {
            full.get(i + 1).is_some_and(|&e| same_letter(e.char(), 'e'))
                && (i == 0 || !is_word(full[i - 1].char()))
                && (starts_with_at(full, i, "certain_tool_call")
                    || (starts_with_at(full, i, "default_api")
                        && matches!(char_at(full, i + 11), Some(':' | '.'))))
        }
        _ => false,
    }
}

/// Whether `full[i..]` starts with `{`, optional whitespace, a quote, a call key, a quote,
/// optional whitespace and `:` (the quotes may differ; the key is case-insensitive).
fn json_call_at<C: Unit>(full: &[C], i: usize) -> bool {
    if full[i].char() != '{' {
        return false;
    }
    let mut at = i + 1;
    while char_at(full, at).is_some_and(is_space) {
        at += 1;
    }
    if !matches!(char_at(full, at), Some('"' | '\'')) {
        return false;
    }
    at += 1;
    CALL_KEYS.iter().any(|key| {
        if !starts_with_at(full, at, key) {
            return false;
        }
        let mut end = at + key.len();
        if !matches!(char_at(full, end), Some('"' | '\'')) {
            return false;
        }
        end += 1;
        while char_at(full, end).is_some_and(is_space) {
            end += 1;
        }
        char_at(full, end) == Some(':')
    })
}

/// Where the end of `full` could still be the start of a call marker (the tail to hold), or
/// `full.len()` when it cannot, so a piece that ends on a space, a full stop or any
/// non-Latin letter holds nothing back. Only the last [`TAIL_SCAN`] chars, from `start` on,
/// are candidates; a letter starts a tail only at a word start.
fn tail_start<C: Unit>(full: &[C], start: usize) -> usize {
    let from = start.max(full.len().saturating_sub(TAIL_SCAN));
    (from..full.len())
        .find(|&i| {
            let c = full[i].char();
            TAIL_STARTS.contains(&c)
                && !(c.is_ascii_alphabetic() && i > 0 && is_word(full[i - 1].char()))
                && may_open_spoken_call(&full[i..])
        })
        .unwrap_or(full.len())
}

/// Whether `s` is a strict prefix of a call marker, so the next piece could complete it: a
/// prefix of a spoken head, or a JSON opening that could still become `{"<call key>":`
/// (`{`, `{ "`, `{"na`, `{"name"`).
fn may_open_spoken_call<C: Unit>(s: &[C]) -> bool {
    SPOKEN_HEADS.iter().any(|head| is_prefix_of(s, head)) || json_opening(s)
}

/// Whether `s` is a prefix of the ASCII `pattern`, char by char as a marker is matched
/// ([`same_letter`]): a tail is held exactly when the rest of a marker would complete it, so
/// a marker split across pieces is cut as it is when whole (`certaı` + `n_tool_call`).
fn is_prefix_of<C: Unit>(s: &[C], pattern: &str) -> bool {
    s.len() <= pattern.len()
        && s.iter()
            .zip(pattern.chars())
            .all(|(&c, p)| same_letter(c.char(), p))
}

/// Whether the whole of `s` is `{`, optional whitespace, and optionally a quote with the
/// letters of a key so far, and optionally a closing quote (either kind, as [`json_call_at`]
/// takes) and whitespace; with the key closed it must be a call key, with it open it must be
/// the start of one, its letters matched as a marker's are.
fn json_opening<C: Unit>(s: &[C]) -> bool {
    if char_at(s, 0) != Some('{') {
        return false;
    }
    let mut at = 1;
    while char_at(s, at).is_some_and(is_space) {
        at += 1;
    }
    let Some(quote) = char_at(s, at) else {
        return true;
    };
    if quote != '"' && quote != '\'' {
        return false;
    }
    at += 1;
    let key_start = at;
    while char_at(s, at).is_some_and(is_key_letter) {
        at += 1;
    }
    let key = &s[key_start..at];
    if at == s.len() {
        return CALL_KEYS.iter().any(|k| is_prefix_of(key, k));
    }
    if !matches!(s[at].char(), '"' | '\'') {
        return false;
    }
    at += 1;
    while char_at(s, at).is_some_and(is_space) {
        at += 1;
    }
    at == s.len()
        && CALL_KEYS
            .iter()
            .any(|k| key.len() == k.len() && is_prefix_of(key, k))
}

/// The characters Rust's `is_alphabetic` accepts that are neither letters nor numbers (the
/// Unicode `Other_Alphabetic` property: combining marks and circled letters), as inclusive
/// `[start, end]` code point pairs in ascending order. Generated from the Unicode 15.0 data.
const NOT_WORD: [u32; 482] = [
    0x0345, 0x0345, 0x0363, 0x036F, 0x05B0, 0x05BD, 0x05BF, 0x05BF, 0x05C1, 0x05C2, 0x05C4, 0x05C5,
    0x05C7, 0x05C7, 0x0610, 0x061A, 0x064B, 0x0657, 0x0659, 0x065F, 0x0670, 0x0670, 0x06D6, 0x06DC,
    0x06E1, 0x06E4, 0x06E7, 0x06E8, 0x06ED, 0x06ED, 0x0711, 0x0711, 0x0730, 0x073F, 0x07A6, 0x07B0,
    0x0816, 0x0817, 0x081B, 0x0823, 0x0825, 0x0827, 0x0829, 0x082C, 0x08D4, 0x08DF, 0x08E3, 0x08E9,
    0x08F0, 0x0903, 0x093A, 0x093B, 0x093E, 0x094C, 0x094E, 0x094F, 0x0955, 0x0957, 0x0962, 0x0963,
    0x0981, 0x0983, 0x09BE, 0x09C4, 0x09C7, 0x09C8, 0x09CB, 0x09CC, 0x09D7, 0x09D7, 0x09E2, 0x09E3,
    0x0A01, 0x0A03, 0x0A3E, 0x0A42, 0x0A47, 0x0A48, 0x0A4B, 0x0A4C, 0x0A51, 0x0A51, 0x0A70, 0x0A71,
    0x0A75, 0x0A75, 0x0A81, 0x0A83, 0x0ABE, 0x0AC5, 0x0AC7, 0x0AC9, 0x0ACB, 0x0ACC, 0x0AE2, 0x0AE3,
    0x0AFA, 0x0AFC, 0x0B01, 0x0B03, 0x0B3E, 0x0B44, 0x0B47, 0x0B48, 0x0B4B, 0x0B4C, 0x0B56, 0x0B57,
    0x0B62, 0x0B63, 0x0B82, 0x0B82, 0x0BBE, 0x0BC2, 0x0BC6, 0x0BC8, 0x0BCA, 0x0BCC, 0x0BD7, 0x0BD7,
    0x0C00, 0x0C04, 0x0C3E, 0x0C44, 0x0C46, 0x0C48, 0x0C4A, 0x0C4C, 0x0C55, 0x0C56, 0x0C62, 0x0C63,
    0x0C81, 0x0C83, 0x0CBE, 0x0CC4, 0x0CC6, 0x0CC8, 0x0CCA, 0x0CCC, 0x0CD5, 0x0CD6, 0x0CE2, 0x0CE3,
    0x0CF3, 0x0CF3, 0x0D00, 0x0D03, 0x0D3E, 0x0D44, 0x0D46, 0x0D48, 0x0D4A, 0x0D4C, 0x0D57, 0x0D57,
    0x0D62, 0x0D63, 0x0D81, 0x0D83, 0x0DCF, 0x0DD4, 0x0DD6, 0x0DD6, 0x0DD8, 0x0DDF, 0x0DF2, 0x0DF3,
    0x0E31, 0x0E31, 0x0E34, 0x0E3A, 0x0E4D, 0x0E4D, 0x0EB1, 0x0EB1, 0x0EB4, 0x0EB9, 0x0EBB, 0x0EBC,
    0x0ECD, 0x0ECD, 0x0F71, 0x0F83, 0x0F8D, 0x0F97, 0x0F99, 0x0FBC, 0x102B, 0x1036, 0x1038, 0x1038,
    0x103B, 0x103E, 0x1056, 0x1059, 0x105E, 0x1060, 0x1062, 0x1064, 0x1067, 0x106D, 0x1071, 0x1074,
    0x1082, 0x108D, 0x108F, 0x108F, 0x109A, 0x109D, 0x1712, 0x1713, 0x1732, 0x1733, 0x1752, 0x1753,
    0x1772, 0x1773, 0x17B6, 0x17C8, 0x1885, 0x1886, 0x18A9, 0x18A9, 0x1920, 0x192B, 0x1930, 0x1938,
    0x1A17, 0x1A1B, 0x1A55, 0x1A5E, 0x1A61, 0x1A74, 0x1ABF, 0x1AC0, 0x1ACC, 0x1ACE, 0x1B00, 0x1B04,
    0x1B35, 0x1B43, 0x1B80, 0x1B82, 0x1BA1, 0x1BA9, 0x1BAC, 0x1BAD, 0x1BE7, 0x1BF1, 0x1C24, 0x1C36,
    0x1DD3, 0x1DF4, 0x24B6, 0x24E9, 0x2DE0, 0x2DFF, 0xA674, 0xA67B, 0xA69E, 0xA69F, 0xA802, 0xA802,
    0xA80B, 0xA80B, 0xA823, 0xA827, 0xA880, 0xA881, 0xA8B4, 0xA8C3, 0xA8C5, 0xA8C5, 0xA8FF, 0xA8FF,
    0xA926, 0xA92A, 0xA947, 0xA952, 0xA980, 0xA983, 0xA9B4, 0xA9BF, 0xA9E5, 0xA9E5, 0xAA29, 0xAA36,
    0xAA43, 0xAA43, 0xAA4C, 0xAA4D, 0xAA7B, 0xAA7D, 0xAAB0, 0xAAB0, 0xAAB2, 0xAAB4, 0xAAB7, 0xAAB8,
    0xAABE, 0xAABE, 0xAAEB, 0xAAEF, 0xAAF5, 0xAAF5, 0xABE3, 0xABEA, 0xFB1E, 0xFB1E, 0x10376,
    0x1037A, 0x10A01, 0x10A03, 0x10A05, 0x10A06, 0x10A0C, 0x10A0F, 0x10D24, 0x10D27, 0x10EAB,
    0x10EAC, 0x11000, 0x11002, 0x11038, 0x11045, 0x11073, 0x11074, 0x11080, 0x11082, 0x110B0,
    0x110B8, 0x110C2, 0x110C2, 0x11100, 0x11102, 0x11127, 0x11132, 0x11145, 0x11146, 0x11180,
    0x11182, 0x111B3, 0x111BF, 0x111CE, 0x111CF, 0x1122C, 0x11234, 0x11237, 0x11237, 0x1123E,
    0x1123E, 0x11241, 0x11241, 0x112DF, 0x112E8, 0x11300, 0x11303, 0x1133E, 0x11344, 0x11347,
    0x11348, 0x1134B, 0x1134C, 0x11357, 0x11357, 0x11362, 0x11363, 0x11435, 0x11441, 0x11443,
    0x11445, 0x114B0, 0x114C1, 0x115AF, 0x115B5, 0x115B8, 0x115BE, 0x115DC, 0x115DD, 0x11630,
    0x1163E, 0x11640, 0x11640, 0x116AB, 0x116B5, 0x1171D, 0x1172A, 0x1182C, 0x11838, 0x11930,
    0x11935, 0x11937, 0x11938, 0x1193B, 0x1193C, 0x11940, 0x11940, 0x11942, 0x11942, 0x119D1,
    0x119D7, 0x119DA, 0x119DF, 0x119E4, 0x119E4, 0x11A01, 0x11A0A, 0x11A35, 0x11A39, 0x11A3B,
    0x11A3E, 0x11A51, 0x11A5B, 0x11A8A, 0x11A97, 0x11C2F, 0x11C36, 0x11C38, 0x11C3E, 0x11C92,
    0x11CA7, 0x11CA9, 0x11CB6, 0x11D31, 0x11D36, 0x11D3A, 0x11D3A, 0x11D3C, 0x11D3D, 0x11D3F,
    0x11D41, 0x11D43, 0x11D43, 0x11D47, 0x11D47, 0x11D8A, 0x11D8E, 0x11D90, 0x11D91, 0x11D93,
    0x11D96, 0x11EF3, 0x11EF6, 0x11F00, 0x11F01, 0x11F03, 0x11F03, 0x11F34, 0x11F3A, 0x11F3E,
    0x11F40, 0x16F4F, 0x16F4F, 0x16F51, 0x16F87, 0x16F8F, 0x16F92, 0x16FF0, 0x16FF1, 0x1BC9E,
    0x1BC9E, 0x1E000, 0x1E006, 0x1E008, 0x1E018, 0x1E01B, 0x1E021, 0x1E023, 0x1E024, 0x1E026,
    0x1E02A, 0x1E08F, 0x1E08F, 0x1E947, 0x1E947, 0x1F130, 0x1F149, 0x1F150, 0x1F169, 0x1F170,
    0x1F189,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// What a guard did with one response: the release of every piece, then the settle, and
    /// everything released, joined.
    struct Run {
        guard: Guard,
        steps: Vec<Vec<String>>,
        settled: Vec<String>,
        said: String,
    }

    fn owned(released: Released<'_>) -> Vec<String> {
        released.into_iter().map(Cow::into_owned).collect()
    }

    /// Feeds `pieces` to a new guard one by one, then settles it if `finish` is given
    /// (`Some(malformed)`).
    fn run(pieces: &[&str], finish: Option<bool>) -> Run {
        let mut guard = Guard::new();
        let mut steps = Vec::new();
        for piece in pieces {
            steps.push(owned(guard.release(piece)));
        }
        let settled = finish.map_or_else(Vec::new, |malformed| owned(guard.settle(malformed)));
        let said = steps
            .iter()
            .flatten()
            .chain(&settled)
            .map(String::as_str)
            .collect();
        Run {
            guard,
            steps,
            settled,
            said,
        }
    }

    /// `Vec<String>` from string literals, for comparing releases.
    fn v(pieces: &[&str]) -> Vec<String> {
        pieces.iter().map(|p| (*p).to_owned()).collect()
    }

    #[test]
    fn speech_under_way_is_released_without_a_copy() {
        let mut g = Guard::new();
        // The opening is held until it is decided, so it goes out as a copy.
        assert_eq!(g.release("Hello there, "), ["Hello there, "]);
        let more = String::from("how are you?");
        let out = g.release(&more);
        assert!(matches!(out[..], [Cow::Borrowed(p)] if std::ptr::eq(p, more.as_str())));
        // A held tail is a copy; the piece after it is borrowed again.
        let r = g.release(" Let me check d");
        assert_eq!(r, [" Let me check "]);
        let out = g.release("octors.");
        assert!(
            matches!(out[..], [Cow::Owned(_), Cow::Borrowed("octors.")]),
            "{out:?}"
        );
    }

    #[test]
    fn hello_is_spoken_at_once() {
        let r = run(&["Hello"], Some(false));
        assert_eq!(r.steps, [v(&["Hello"])]);
        assert_eq!(r.guard.leaked(), Some(false));
    }

    #[test]
    fn devanagari_is_spoken_at_once() {
        let r = run(&["नमस्ते"], Some(false));
        assert_eq!(r.steps, [v(&["नमस्ते"])]);
        assert!(!r.guard.is_holding());
    }

    #[test]
    fn digits_are_spoken_at_once() {
        let r = run(&["12 items"], Some(false));
        assert_eq!(r.steps, [v(&["12 items"])]);
        assert_eq!(r.guard.leaked(), Some(false));
    }

    #[test]
    fn released_pieces_keep_their_order_inline_and_once_spilled() {
        let mut r = Released::new();
        assert!(r.is_empty());
        r.push(Cow::Borrowed("a"));
        r.push(Cow::Owned("b".to_owned()));
        assert_eq!(r, ["a", "b"]);
        r.extend([Cow::Borrowed("c"), Cow::Borrowed("d")]);
        assert_eq!(r, ["a", "b", "c", "d"]);
        r[0] = Cow::Borrowed("A");
        let all: Vec<Cow<'_, str>> = r.into_iter().collect();
        assert_eq!(all, ["A", "b", "c", "d"]);
        let two: Vec<Cow<'_, str>> = Released::one(Cow::Borrowed("x")).into_iter().collect();
        assert_eq!(two, ["x"]);
    }

    #[test]
    fn default_is_held_then_spoken_as_two_pieces() {
        let mut g = Guard::new();
        assert_eq!(g.release("Default"), v(&[]));
        assert!(g.is_holding());
        assert_eq!(g.leaked(), None);
        assert_eq!(
            g.release(" settings are on."),
            v(&["Default", " settings are on."])
        );
        assert!(!g.is_holding());
    }

    #[test]
    fn tool_then_call_suffix_leaks() {
        let r = run(&["Tool", "_call: x"], Some(false));
        assert_eq!(r.steps, [v(&[]), v(&[])]);
        assert!(r.settled.is_empty());
        assert_eq!(r.guard.leaked(), Some(true));
        assert_eq!(r.said, "");
    }

    #[test]
    fn json_with_a_call_key_leaks() {
        let r = run(&["{", r#""name": "open_booking"}"#], Some(false));
        assert_eq!(r.steps, [v(&[]), v(&[])]);
        assert_eq!(r.guard.leaked(), Some(true));
    }

    /// Also the text-level expectation of a `{` + `"city": "Paris"}` response: two chunks.
    #[test]
    fn json_with_another_key_is_spoken_as_two_pieces() {
        let r = run(&["{", r#""city": "Paris"}"#], Some(false));
        assert_eq!(r.steps, [v(&[]), v(&["{", r#""city": "Paris"}"#])]);
        assert_eq!(r.guard.leaked(), Some(false));
    }

    #[test]
    fn underscored_identifier_leaks() {
        let r = run(&["read_screen()"], Some(false));
        assert_eq!(r.steps, [v(&[])]);
        assert_eq!(r.guard.leaked(), Some(true));
    }

    #[test]
    fn code_fence_leaks() {
        let r = run(&["```json"], Some(false));
        assert_eq!(r.steps, [v(&[])]);
        assert_eq!(r.guard.leaked(), Some(true));
    }

    #[test]
    fn call_after_speech_cuts_there() {
        let r = run(&["Opening it now. ", "default_api:open()"], Some(false));
        assert_eq!(r.steps, [v(&["Opening it now. "]), v(&[])]);
        assert!(r.settled.is_empty());
        assert_eq!(r.guard.leaked(), Some(true));
        assert_eq!(r.said, "Opening it now. ");
    }

    #[test]
    fn tool_call_mid_sentence_is_speech() {
        let r = run(&["Use the tool_call feature"], Some(false));
        assert_eq!(r.steps, [v(&["Use the tool_call feature"])]);
        assert_eq!(r.guard.leaked(), Some(false));
    }

    #[test]
    fn default_api_without_colon_is_speech() {
        let r = run(&["I said default_api is fine"], Some(false));
        assert_eq!(r.steps, [v(&["I said default_api is fine"])]);
        assert_eq!(r.guard.leaked(), Some(false));
    }

    #[test]
    fn call_tag_after_speech_cuts_there() {
        let r = run(&["Here: <tool_call>"], Some(false));
        assert_eq!(r.steps, [v(&["Here: "])]);
        assert_eq!(r.guard.leaked(), Some(true));
    }

    #[test]
    fn held_brace_goes_out_before_the_next_piece() {
        let r = run(&["Ok {", "fine}"], Some(false));
        assert_eq!(r.steps, [v(&["Ok "]), v(&["{", "fine}"])]);
        assert_eq!(r.guard.leaked(), Some(false));
    }

    #[test]
    fn lone_default_is_spoken_at_the_finish() {
        let r = run(&["Default"], Some(false));
        assert_eq!(r.steps, [v(&[])]);
        assert_eq!(r.settled, v(&["Default"]));
        assert_eq!(r.guard.leaked(), Some(false));
        assert!(!r.guard.is_holding());
    }

    /// Also the text-level expectation of a `Hello` response with a malformed finish: spoken,
    /// and the finish is malformed (the turn retries once).
    #[test]
    fn hello_then_malformed_finish_is_spoken_and_malformed() {
        let r = run(&["Hello"], Some(true));
        assert_eq!(r.steps, [v(&["Hello"])]);
        assert!(r.settled.is_empty());
        assert!(r.guard.malformed());
        assert_eq!(r.guard.leaked(), Some(false));
    }

    #[test]
    fn tool_prefix_then_plain_word_is_spoken_as_two_pieces() {
        let r = run(&["Tool", "s are ready."], Some(false));
        assert_eq!(r.steps, [v(&[]), v(&["Tool", "s are ready."])]);
        assert!(r.settled.is_empty());
    }

    #[test]
    fn a_held_tail_goes_out_before_a_real_call() {
        let mut g = Guard::new();
        assert_eq!(g.release("Checking the default"), ["Checking the "]);
        assert_eq!(g.before_call(), ["default"]);
        assert!(g.before_call().is_empty());
        let mut fence = Guard::new();
        assert!(fence.release("```tool_code").is_empty());
        assert!(
            fence.before_call().is_empty(),
            "a call written as text stays unspoken"
        );
        let mut opening = Guard::new();
        assert!(opening.release("Default").is_empty());
        assert_eq!(
            opening.before_call(),
            ["Default"],
            "an undecided opening is speech"
        );
    }

    #[test]
    fn default_at_the_end_of_speech_is_held_one_piece() {
        let r = run(&["Say default", " value."], Some(false));
        assert_eq!(r.steps, [v(&["Say "]), v(&["default", " value."])]);
        assert_eq!(r.guard.leaked(), Some(false));
    }

    #[test]
    fn verdicts_on_openings() {
        let cases: &[(&str, Option<bool>)] = &[
            ("default_api", Some(true)),
            ("Default", None),
            ("{", None),
            ("{\"name", None),
            ("{\"name\"", Some(true)),
            ("functions.x", Some(true)),
            ("x_y", Some(true)),
            ("X", Some(false)),
            ("{'tool':", Some(true)),
            ("print(", None),
            // More of the rules.
            ("", None),
            ("   ", None),
            ("  \u{1f}tool_use", Some(true)),
            ("TOOL_CALL", Some(true)),
            ("`", None),
            ("[\"tool_call\"", Some(true)),
            ("<function_call>", Some(true)),
            ("{\"city\"", Some(false)),
            ("{\"name x", Some(false)),
            ("{ 12", Some(false)),
            ("call me", Some(false)),
            ("Hello", Some(false)),
            ("नमस्ते", Some(false)),
            ("12 items", Some(false)),
            ("😀 hi", Some(false)),
            // Case folding, not lowercasing: `ß` folds to `ss`, a key that may still grow.
            ("{\"ß", None),
            ("ﬁle_it", Some(true)),
        ];
        for (opening, verdict) in cases {
            assert_eq!(looks_like_call(opening), *verdict, "{opening:?}");
        }
    }

    #[test]
    fn call_d_then_octor_keeps_the_boundaries() {
        let r = run(&["Call d", "octor Who."], Some(false));
        assert_eq!(r.steps, [v(&["Call "]), v(&["d", "octor Who."])]);
        assert_eq!(r.said, "Call doctor Who.");
    }

    #[test]
    fn head_split_across_three_pieces_after_speech_leaks() {
        let r = run(
            &["Sure. ", "defa", "ult_a", "pi:read_screen()"],
            Some(false),
        );
        assert_eq!(r.steps, [v(&["Sure. "]), v(&[]), v(&[]), v(&[])]);
        assert!(r.settled.is_empty());
        assert_eq!(r.guard.leaked(), Some(true));
        assert_eq!(r.said, "Sure. ");
    }

    #[test]
    fn head_split_across_three_pieces_at_the_opening_leaks() {
        let mut g = Guard::new();
        assert!(g.release("de").is_empty());
        assert!(g.release("fault_").is_empty());
        assert_eq!(g.leaked(), None);
        assert!(g.release("api:x()").is_empty());
        assert_eq!(g.leaked(), Some(true));
        assert!(g.settle(false).is_empty());
    }

    #[test]
    fn head_after_a_word_char_is_not_a_call() {
        let r = run(&["See mydefault_api: here"], Some(false));
        assert_eq!(r.steps, [v(&["See mydefault_api: here"])]);
        assert_eq!(r.guard.leaked(), Some(false));
        // The word char is in the previous piece.
        let r = run(&["See my", "default_api: here"], Some(false));
        assert_eq!(r.steps, [v(&["See my"]), v(&["default_api: here"])]);
        assert_eq!(r.guard.leaked(), Some(false));
        // The same head at a word start is a call.
        let r = run(&["See my ", "default_api: here"], Some(false));
        assert_eq!(r.steps, [v(&["See my "]), v(&[])]);
        assert_eq!(r.guard.leaked(), Some(true));
    }

    #[test]
    fn spoken_markers_ignore_case() {
        let r = run(&["Sure. DEFAULT_API.open()"], Some(false));
        assert_eq!(r.steps, [v(&["Sure. "])]);
        let r = run(&["Sure. ", "{ 'Name' :1}"], Some(false));
        assert_eq!(r.steps, [v(&["Sure. "]), v(&[])]);
        assert_eq!(r.guard.leaked(), Some(true));
    }

    #[test]
    fn non_latin_text_and_emoji_around_boundaries() {
        let r = run(&["नमस्ते 😀 ", "default_api:x"], Some(false));
        assert_eq!(r.steps, [v(&["नमस्ते 😀 "]), v(&[])]);
        assert_eq!(r.said, "नमस्ते 😀 ");
        assert_eq!(r.guard.leaked(), Some(true));

        let r = run(&["😀 Call d", "octor 🎉"], Some(false));
        assert_eq!(r.steps, [v(&["😀 Call "]), v(&["d", "octor 🎉"])]);

        let r = run(&["日本語の{", "\"name\": 1}"], Some(false));
        assert_eq!(r.steps, [v(&["日本語の"]), v(&[])]);
        assert_eq!(r.said, "日本語の");

        let r = run(&["Café 🎉 `", "`", "` ok"], Some(false));
        assert_eq!(r.steps, [v(&["Café 🎉 "]), v(&[]), v(&[])]);
        assert_eq!(r.guard.leaked(), Some(true));

        let r = run(&["Ünï 🎉 {", "\"ñame\": 1}"], Some(false));
        assert_eq!(r.steps, [v(&["Ünï 🎉 "]), v(&["{", "\"ñame\": 1}"])]);
        assert_eq!(r.guard.leaked(), Some(false));
    }

    /// A vowel sign ends `नमस्ते`; it is a combining mark, not a word char, so a marker glued
    /// right after it still starts a word.
    #[test]
    fn marker_glued_after_a_combining_mark_is_cut() {
        let r = run(&["नमस्ते", "default_api:x"], Some(false));
        assert_eq!(r.steps, [v(&["नमस्ते"]), v(&[])]);
        assert_eq!(r.guard.leaked(), Some(true));
        let r = run(&["नमस्तेdefault_api.x"], Some(false));
        assert_eq!(r.steps, [v(&["नमस्ते"])]);
        // A letter of the same script is a word char.
        let r = run(&["नमस्तन", "default_api:x"], Some(false));
        assert_eq!(r.steps, [v(&["नमस्तन"]), v(&["default_api:x"])]);
    }

    #[test]
    fn word_chars_are_letters_numbers_and_underscore() {
        for c in ['a', 'Z', '_', '7', 'न', '日', 'ß', '٣', 'Ⅻ'] {
            assert!(is_word(c), "{c:?}");
        }
        for c in [
            ' ',
            ':',
            '😀',
            '\u{947}',
            '\u{64e}',
            '\u{24b6}',
            '\u{345}',
            '\u{1e94a}',
        ] {
            assert!(!is_word(c), "{c:?}");
        }
    }

    #[test]
    fn tail_is_held_within_a_64_char_window() {
        let mut g = Guard::new();
        assert_eq!(g.release("Ok {"), v(&["Ok "]));
        // The brace and 63 spaces: 64 chars, still a JSON opening inside the window.
        assert!(g.release(&" ".repeat(63)).is_empty());
        assert!(g.is_holding());
        // One more char pushes the brace out of the window: the tail goes out, then the piece.
        let brace_and_spaces = format!("{{{}", " ".repeat(63));
        assert_eq!(g.release(" "), v(&[&brace_and_spaces, " "]));
        assert!(!g.is_holding());
    }

    /// ASCII text screened as bytes ends, holds and cuts exactly where it does as chars: every
    /// cut of every marker, near-marker and JSON opening, behind a space, a word char or
    /// nothing.
    #[test]
    fn ascii_screened_as_bytes_agrees_with_chars() {
        let texts = [
            "Hello there, how can I help you today?",
            "Say ```tool_code",
            "ok <tool_call> <tool_codex <function_call <Tool_Call",
            "certain_tool_call CERTAIN_TOOL_CALL, uncertain_tool_call",
            "default_api:read_screen() Default_API.x default_api now mydefault_api:",
            "{\"name\": 1} {'Args' : 2} {  \"nam {\"other\": 3} { \"name\"   ",
            "decide, deliver, cede; d De c Ce ` `` <",
            &format!("Ok {{{}\"name\":", " ".repeat(70)),
        ];
        for text in texts {
            let chars: Vec<char> = text.chars().collect();
            for cut in 0..=text.len() {
                for before in ["", " ", "x", "{"] {
                    let full = format!("{before}{}", &text[..cut]);
                    let as_chars: Vec<char> = full.chars().collect();
                    let start = before.len();
                    assert_eq!(
                        screen(full.as_bytes(), start),
                        screen(&as_chars, start),
                        "{full:?} from {start}"
                    );
                }
            }
            assert_eq!(chars.len(), text.len(), "the texts are ASCII");
        }
        // And texts made at random of the characters the markers are made of.
        let alphabet = b"`<{}\"': \t\n._-cdeCDEaiplotnmrfsxuAIL0";
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |below: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % below as u64) as usize
        };
        for _ in 0..4000 {
            let len = next(90);
            let bytes: Vec<u8> = (0..len).map(|_| alphabet[next(alphabet.len())]).collect();
            let as_chars: Vec<char> = bytes.iter().map(|&b| char::from(b)).collect();
            for start in [0, 1.min(len)] {
                assert_eq!(
                    screen(&bytes, start),
                    screen(&as_chars, start),
                    "{:?} from {start}",
                    String::from_utf8_lossy(&bytes)
                );
            }
        }
    }

    #[test]
    fn call_key_far_inside_the_window_leaks() {
        let spaces = " ".repeat(40);
        let r = run(&["Ok {", &spaces, "\"name\":"], Some(false));
        assert_eq!(r.steps, [v(&["Ok "]), v(&[]), v(&[])]);
        assert_eq!(r.guard.leaked(), Some(true));
    }

    #[test]
    fn stream_end_after_an_undecided_opening_speaks_it() {
        let r = run(&["Tool"], Some(false));
        assert_eq!(r.settled, v(&["Tool"]));
        assert_eq!(r.guard.leaked(), Some(false));
        assert!(!r.guard.malformed());

        // A held JSON opening goes out as one tail piece.
        let r = run(&["{", "\"na"], Some(false));
        assert_eq!(r.steps, [v(&[]), v(&[])]);
        assert_eq!(r.settled, v(&["{\"na"]));
        assert_eq!(r.guard.leaked(), Some(false));
    }

    #[test]
    fn malformed_finish_after_an_undecided_opening_is_a_leak() {
        let r = run(&["Default"], Some(true));
        assert!(r.settled.is_empty());
        assert_eq!(r.guard.leaked(), Some(true));
        assert!(r.guard.malformed());
        assert!(!r.guard.is_holding());
    }

    #[test]
    fn malformed_finish_never_releases_the_tail() {
        let r = run(&["Say d"], Some(true));
        assert_eq!(r.steps, [v(&["Say "])]);
        assert!(r.settled.is_empty());
        assert_eq!(r.said, "Say ");
        assert!(!r.guard.is_holding());
    }

    #[test]
    fn nothing_is_released_after_a_leak() {
        let r = run(&["Here: ```", "more words", "and more"], Some(false));
        assert_eq!(r.steps, [v(&["Here: "]), v(&[]), v(&[])]);
        assert!(r.settled.is_empty());
        assert_eq!(r.said, "Here: ");
    }

    #[test]
    fn a_new_guard_holds_nothing() {
        let g = Guard::new();
        assert_eq!(g.leaked(), None);
        assert!(!g.is_holding());
        assert!(!g.malformed());
    }

    #[test]
    fn retry_note_is_one_plain_paragraph() {
        assert!(!RETRY_NOTE.contains('\n'));
        assert!(!RETRY_NOTE.contains("  "));
        assert!(RETRY_NOTE.contains("function calling"));
    }

    #[test]
    fn a_tail_is_held_exactly_when_the_rest_of_a_marker_completes_it() {
        let cases = [
            "",
            "d",
            "D",
            "De",
            "DEFAULT_API:",
            "default_api.x",
            "default_apİ",
            "c",
            "Certain_",
            "certaı",
            "ß",
            "İ",
            "<t",
            "<TOOL_CALL",
            "<functİ",
            "```",
            "`",
            "{",
            "dx",
            "defaultapi",
        ];
        for s in cases {
            let chars: Vec<char> = s.chars().collect();
            for head in SPOKEN_HEADS {
                let completed: Vec<char> = chars
                    .iter()
                    .copied()
                    .chain(head.chars().skip(chars.len()))
                    .collect();
                assert_eq!(
                    is_prefix_of(&chars, head),
                    chars.len() <= head.len() && starts_with_at(&completed, 0, head),
                    "{s:?} against {head:?}"
                );
            }
        }
    }

    /// A marker split across pieces is cut where it is cut when it arrives whole, whatever
    /// letters (`İ`, `ı`, `ſ`) or quotes it matches with.
    #[test]
    fn a_split_marker_is_cut_as_a_whole_one() {
        let splits: [&[&str]; 7] = [
            &["default_apİ", ":x()"],
            &["certaı", "n_tool_call"],
            &["<functİ", "on_call>"],
            &["{\"actİ", "on\": 1}"],
            &["{\"argſ", "\": 1}"],
            &["{\"name'", ": \"open_booking\"}"],
            &["{\"na", "me\"", " ", ": 1}"],
        ];
        for pieces in splits {
            let whole = pieces.concat();
            let split = run(&[&["Okay. "], pieces].concat(), Some(false));
            let one = run(&["Okay. ", &whole], Some(false));
            assert_eq!(one.said, "Okay. ", "{whole:?} whole");
            assert_eq!(split.said, "Okay. ", "{pieces:?}");
            assert_eq!(split.guard.leaked(), Some(true), "{pieces:?}");
        }
    }

    /// Any whitespace after a wrapper is skipped, as in the rest of the rules.
    #[test]
    fn unicode_whitespace_after_a_wrapper_hides_no_call() {
        for opening in [
            "{\u{a0}\"read_screen\": {}}",
            "{\u{1f}\"open_booking\": 1}",
            "<\u{a0}tool_call>",
            "[\u{3000}\"tool_call\"]",
            "{\u{2028}\"name\": \"x\"}",
        ] {
            assert_eq!(looks_like_call(opening), Some(true), "{opening:?}");
            let r = run(&[opening], Some(false));
            assert_eq!(r.said, "", "{opening:?}");
        }
    }
}
