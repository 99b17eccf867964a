//! The verdict on a response's opening: a function call written as text, speech, or undecided
//! until the next piece.

use super::{CALL_KEYS, is_space};

/// How a function call written as text opens a response. Ordinary speech, in any language,
/// opens with none of these, so a response that does is held and never spoken. Matched on
/// the case-folded opening.
const CALL_HEADS: [&str; 9] = [
    "```",
    "tool_call",
    "tool_code",
    "tool_use",
    "certain_tool_call",
    "function_call",
    "functions.",
    "default_api",
    "print(default_api",
];

/// Characters that may wrap a call written as text (`{"name": …`, `["tool_call" …`, `<tool_use>`).
const WRAPPERS: [char; 5] = ['{', '[', '<', '"', '\''];

/// The verdict on a response's opening text: `Some(true)` = a function call written as text,
/// `Some(false)` = speech, `None` = undecided yet (the next piece decides).
///
/// The verdict comes from the opening only, so ordinary speech is decided at once: an opening
/// that starts with a letter, a digit or any non-Latin script is speech whatever follows,
/// braces and underscores mid-sentence included. The rules, on the opening with leading
/// whitespace removed and case folded:
///
/// * empty: undecided;
/// * starts with a call head ([`CALL_HEADS`]): a call;
/// * is a strict prefix of a call head (`Default`, `Tool`, `` ` ``, `print(`): undecided;
/// * opens with a wrapper (`{ [ < " '`): the wrappers and whitespace after it are skipped;
///   nothing left is undecided, a call head after them is a call;
/// * then an identifier `[a-z_][a-z0-9_]*` must follow, else speech (digits, punctuation,
///   non-Latin scripts);
/// * an identifier with an underscore is a call (`read_screen(`: nobody says an underscore);
/// * an unwrapped identifier is speech;
/// * a wrapped identifier that reaches the end of the text is undecided; otherwise it is a
///   call only when it is a call key ([`CALL_KEYS`]) followed by `"`, `'` or `:`.
pub(crate) fn looks_like_call(opening: &str) -> Option<bool> {
    verdict(&casefold(deciding(opening.trim_start_matches(is_space))))
}

/// [`looks_like_call`]'s rules, on the opening folded (its leading whitespace removed).
fn verdict(folded: &str) -> Option<bool> {
    let mut s = folded;
    if s.is_empty() {
        return None;
    }
    if CALL_HEADS.iter().any(|head| s.starts_with(head)) {
        return Some(true);
    }
    if CALL_HEADS.iter().any(|head| head.starts_with(s)) {
        return None;
    }
    let wrapped = s.starts_with(WRAPPERS);
    if wrapped {
        s = s.trim_start_matches(|c| WRAPPERS.contains(&c) || is_space(c));
        if s.is_empty() {
            return None;
        }
        if CALL_HEADS.iter().any(|head| s.starts_with(head)) {
            return Some(true);
        }
    }
    if !s.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') {
        return Some(false);
    }
    // The identifier is ASCII, so its byte length is its char length.
    let len = s
        .bytes()
        .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
        .count();
    let (word, rest) = s.split_at(len);
    if word.contains('_') {
        return Some(true);
    }
    if !wrapped {
        return Some(false);
    }
    let next = rest.chars().next()?;
    Some(CALL_KEYS.contains(&word) && matches!(next, '"' | '\'' | ':'))
}

/// The longest call head, in chars.
const LONGEST_HEAD: usize = 17;

/// The part of `opening` (leading whitespace removed) that [`looks_like_call`] reads, so only it
/// is case-folded: the first [`LONGEST_HEAD`] chars (a call head, or a strict prefix of one), and
/// at least the wrappers and whitespace that open it, the run of letters, digits and `_` after
/// them (the identifier, whatever the folding makes of its letters) and one char more (what
/// follows it). Folding never makes fewer chars than it was given, so what the verdict reads of
/// the folded whole lies within the folded part.
fn deciding(opening: &str) -> &str {
    let mut chars = opening.char_indices().peekable();
    while chars
        .next_if(|(_, c)| WRAPPERS.contains(c) || is_space(*c))
        .is_some()
    {}
    while chars
        .next_if(|(_, c)| c.is_alphanumeric() || *c == '_')
        .is_some()
    {}
    chars.next();
    let read = chars.peek().map_or(opening.len(), |(at, _)| *at);
    let head = opening
        .char_indices()
        .nth(LONGEST_HEAD)
        .map_or(opening.len(), |(at, _)| at);
    &opening[..read.max(head)]
}

/// Unicode full case folding, as far as it can change a verdict: everything folds like its
/// lowercase, except the characters whose full folding differs from their lowercase *and*
/// contains ASCII (the call heads and keys are ASCII, so no other difference can matter):
/// `ß`/`ẞ` fold to `ss`, `ſ` to `s`, the Latin ligatures to their letters, and a few letters
/// with a detached combining mark.
fn casefold(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let folded = match c {
            '\u{df}' | '\u{1e9e}' => "ss",
            '\u{149}' => "\u{2bc}n",
            '\u{17f}' => "s",
            '\u{1f0}' => "j\u{30c}",
            '\u{1e96}' => "h\u{331}",
            '\u{1e97}' => "t\u{308}",
            '\u{1e98}' => "w\u{30a}",
            '\u{1e99}' => "y\u{30a}",
            '\u{1e9a}' => "a\u{2be}",
            '\u{fb00}' => "ff",
            '\u{fb01}' => "fi",
            '\u{fb02}' => "fl",
            '\u{fb03}' => "ffi",
            '\u{fb04}' => "ffl",
            '\u{fb05}' | '\u{fb06}' => "st",
            _ => {
                out.extend(c.to_lowercase());
                continue;
            }
        };
        out.push_str(folded);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_reads_only_the_part_it_folds() {
        let longest = CALL_HEADS.iter().map(|h| h.chars().count()).max();
        assert_eq!(longest, Some(LONGEST_HEAD));
        // Every opening of up to four of these pieces gets the verdict its whole folding gets.
        let pieces = [
            "",
            " ",
            "{",
            "[\"",
            "<",
            "'",
            "\u{df}",
            "\u{17f}",
            "\u{fb01}",
            "\u{212a}",
            "\u{130}",
            "_",
            "a",
            "Z",
            "9",
            "default",
            "_api",
            ".",
            "(",
            ":",
            "\"",
            "tool",
            "_call",
            "name",
            "é",
            "नम",
            "\u{1f600}",
            "\u{301}",
            "`",
            "print",
            "function",
            "s",
            "\u{1e9e}",
        ];
        let mut openings = vec![String::new()];
        for _ in 0..3 {
            let mut longer = Vec::new();
            for opening in &openings {
                for piece in pieces {
                    longer.push(format!("{opening}{piece}"));
                }
            }
            openings.extend(longer);
        }
        openings.extend([
            "x".repeat(40),
            format!("{{\"{}\": 1", "a".repeat(30)),
            format!("[ {}_x", "é".repeat(20)),
            format!("\"{}\"", "ß".repeat(9)),
        ]);
        for opening in &openings {
            let whole = verdict(&casefold(opening.trim_start_matches(is_space)));
            assert_eq!(looks_like_call(opening), whole, "{opening:?}");
        }
    }
}
