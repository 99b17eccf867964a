//! An incremental Server-Sent Events parser, sans IO: [`SseParser::push`] the bytes as they come
//! off the socket, drain [`SseParser::next_item`], and call [`SseParser::finish`] at end of stream.
//!
//! Written here rather than taken from a crate because the common ones fail on what model APIs
//! send: they panic on a leading byte-order mark, stall every later event after one invalid UTF-8
//! byte, and drop a last event that no blank line follows. This one:
//!
//! * strips one leading UTF-8 BOM;
//! * ends lines at `\n`, `\r\n` or a lone `\r` (a `\r` that ends one push and a `\n` that starts
//!   the next are one line end);
//! * joins `data:` lines with `\n`, strips one optional space after the colon, keeps `event:` and
//!   `id:`, ignores comments (`:`), `retry:` and unknown fields;
//! * dispatches an event at a blank line when it has data or an event name, and at
//!   [`finish`](SseParser::finish) without one;
//! * decodes each line on its own, replacing invalid UTF-8 with U+FFFD, so one bad byte spoils
//!   one line, never the events after it;
//! * returns a line that starts with `{` or `[` — not SSE at all, but how Gemini ends some
//!   HTTP-200 streams, with a bare (possibly pretty-printed) `{"error":{…}}` — together with the
//!   lines that follow until its braces and brackets balance, as [`SseItem::Bare`];
//! * returns `data: [DONE]` as an ordinary event: the provider layer decides what it means.
//!
//! Every buffer is bounded by `max_event_bytes` ([`DEFAULT_MAX_EVENT_BYTES`] unless the caller
//! sets another): a longer line, event or bare body is [`SseError::TooLarge`].

use std::mem;

/// The default bound, in bytes, on one line, one event's data and one bare body: 4 MiB. A model's
/// streamed chunk is a few KiB; a whole reply with a large function call stays far below this.
pub(crate) const DEFAULT_MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// The UTF-8 byte-order mark, stripped once at the start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// What the parser can fail with. After an error the parser is spent: it returns the same error
/// from every later call, since the stream can no longer be framed reliably.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SseError {
    /// A line, an event's data or a bare JSON body grew past the parser's bound.
    #[error("server-sent event larger than the {limit}-byte limit")]
    TooLarge {
        /// The bound in bytes (`max_event_bytes`).
        limit: usize,
    },
}

/// One item of a stream, as our SSE parser hands it to a [`Decoder`](super::layer::Decoder).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SseItem {
    /// A server-sent event.
    Event(SseEvent),
    /// A bare JSON value found where SSE lines were expected, with its lines joined by `\n`.
    Bare(String),
}

/// One dispatched server-sent event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SseEvent {
    /// The `event:` field, when the event had one (OpenAI Responses name every event).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n` (empty for an event with a name and no data).
    pub data: String,
    /// The `id:` field of this event, when it had one (not carried over to later events).
    pub id: Option<String>,
}

/// A bare JSON body being collected line by line until its brackets balance.
#[derive(Debug, Default)]
struct Bare {
    text: String,
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl Bare {
    /// Adds one line; returns whether the value is now complete.
    fn add_line(&mut self, line: &str) -> bool {
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(line);
        let mut closed = false;
        for c in line.chars() {
            if self.in_string {
                match c {
                    _ if self.escaped => self.escaped = false,
                    '\\' => self.escaped = true,
                    '"' => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => self.in_string = true,
                '{' | '[' => self.depth += 1,
                '}' | ']' => {
                    self.depth = self.depth.saturating_sub(1);
                    closed |= self.depth == 0;
                }
                _ => {}
            }
        }
        closed && self.depth == 0
    }
}

/// The incremental parser. See the [module docs](self) for the rules it follows.
#[derive(Debug)]
pub(crate) struct SseParser {
    max: usize,
    /// Bytes pushed and not yet consumed as lines, from `pos` on.
    buf: Vec<u8>,
    pos: usize,
    /// How far past `pos` the buffer is known to hold no line end.
    scanned: usize,
    /// Whether the leading BOM has been checked for.
    bom_checked: bool,
    /// The previous line ended with a `\r` at the very end of the buffer: a `\n` that comes next
    /// belongs to that line end.
    after_cr: bool,
    /// The end of the stream was reached ([`finish`](Self::finish)).
    eof: bool,
    /// The event being assembled.
    event: Option<String>,
    data: String,
    has_data: bool,
    id: Option<String>,
    /// A bare JSON body being assembled.
    bare: Option<Bare>,
    /// An item complete but not yet returned (a bare body that closed on the line that also
    /// dispatched a pending event).
    ready: Option<SseItem>,
    /// The error that spent the parser.
    failed: Option<SseError>,
}

impl SseParser {
    /// A parser that refuses any line, event data or bare body longer than `max_event_bytes`
    /// bytes (use [`DEFAULT_MAX_EVENT_BYTES`] unless a provider needs another bound). The bytes
    /// buffered at once stay below `max_event_bytes` plus the size of one [`push`](Self::push).
    pub(crate) fn new(max_event_bytes: usize) -> Self {
        Self {
            max: max_event_bytes,
            buf: Vec::new(),
            pos: 0,
            scanned: 0,
            bom_checked: false,
            after_cr: false,
            eof: false,
            event: None,
            data: String::new(),
            has_data: false,
            id: None,
            bare: None,
            ready: None,
            failed: None,
        }
    }

    /// Feeds bytes as they arrive, split anywhere. Call [`next_item`](Self::next_item) until it
    /// returns `None` after each push, so the buffer stays bounded.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if self.failed.is_some() || self.eof {
            return;
        }
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.scanned -= self.pos;
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete item, or `None` until more bytes are pushed.
    ///
    /// # Errors
    /// [`SseError::TooLarge`] when a line, an event's data or a bare body passes the bound; the
    /// parser is spent from then on.
    pub(crate) fn next_item(&mut self) -> Result<Option<SseItem>, SseError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        let item = self.advance();
        if let Err(err) = &item {
            self.failed = Some(err.clone());
            self.buf = Vec::new();
            self.pos = 0;
            self.scanned = 0;
        }
        item
    }

    /// Marks the end of the stream and returns the next item, treating unterminated input as
    /// complete: a last line without a line end, an event without a blank line after it, a bare
    /// body whose brackets never balanced (returned as it is, never swallowed). Call it (or
    /// [`next_item`](Self::next_item)) until it returns `None`.
    ///
    /// # Errors
    /// As [`next_item`](Self::next_item).
    pub(crate) fn finish(&mut self) -> Result<Option<SseItem>, SseError> {
        self.eof = true;
        self.next_item()
    }

    /// [`next_item`](Self::next_item) before the error bookkeeping.
    fn advance(&mut self) -> Result<Option<SseItem>, SseError> {
        if let Some(item) = self.ready.take() {
            return Ok(Some(item));
        }
        while let Some((start, end)) = self.next_line()? {
            // The line is read in place: the buffer is lent out while it is applied (applying a
            // line never touches the buffer), and a line that is valid UTF-8 is not copied.
            let buf = mem::take(&mut self.buf);
            let bytes = &buf[start..end];
            let line = match std::str::from_utf8(bytes) {
                Ok(line) => std::borrow::Cow::Borrowed(line),
                Err(_) => String::from_utf8_lossy(bytes),
            };
            let applied = self.on_line(&line);
            drop(line);
            self.buf = buf;
            if let Some(item) = applied? {
                return Ok(Some(item));
            }
        }
        if !self.eof {
            return Ok(None);
        }
        if let Some(bare) = self.bare.take() {
            return Ok(Some(SseItem::Bare(bare.text)));
        }
        Ok(self.dispatch())
    }

    /// Where the next whole line lies in the buffer (its line end excluded); at end of stream,
    /// the unterminated rest.
    fn next_line(&mut self) -> Result<Option<(usize, usize)>, SseError> {
        if !self.bom_checked {
            let rest = &self.buf[self.pos..];
            if rest.len() < BOM.len() && BOM.starts_with(rest) && !self.eof {
                return Ok(None);
            }
            if rest.starts_with(BOM) {
                self.pos += BOM.len();
                self.scanned = self.scanned.max(self.pos);
            }
            self.bom_checked = true;
        }
        if self.after_cr && self.pos < self.buf.len() {
            if self.buf[self.pos] == b'\n' {
                self.pos += 1;
                self.scanned = self.scanned.max(self.pos);
            }
            self.after_cr = false;
        }
        let from = self.scanned.max(self.pos);
        let found = memchr::memchr2(b'\n', b'\r', &self.buf[from..]).map(|i| from + i);
        let (end, next) = match found {
            Some(end) if self.buf[end] == b'\r' => match self.buf.get(end + 1) {
                Some(b'\n') => (end, end + 2),
                Some(_) => (end, end + 1),
                None => {
                    self.after_cr = true;
                    (end, end + 1)
                }
            },
            Some(end) => (end, end + 1),
            None => {
                self.scanned = self.buf.len();
                if self.buf.len() - self.pos > self.max {
                    return Err(SseError::TooLarge { limit: self.max });
                }
                if !self.eof || self.pos == self.buf.len() {
                    return Ok(None);
                }
                (self.buf.len(), self.buf.len())
            }
        };
        if end - self.pos > self.max {
            return Err(SseError::TooLarge { limit: self.max });
        }
        let line = (self.pos, end);
        self.pos = next;
        self.scanned = next;
        Ok(Some(line))
    }

    /// Applies one line; returns an item when the line completes one.
    fn on_line(&mut self, line: &str) -> Result<Option<SseItem>, SseError> {
        if let Some(bare) = &mut self.bare {
            let done = bare.add_line(line);
            if bare.text.len() > self.max {
                return Err(SseError::TooLarge { limit: self.max });
            }
            return Ok(done
                .then(|| self.bare.take().map(|b| SseItem::Bare(b.text)))
                .flatten());
        }
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line.starts_with('{') || line.starts_with('[') {
            let mut bare = Bare::default();
            let done = bare.add_line(line);
            let pending = self.dispatch();
            let item = done.then(|| SseItem::Bare(mem::take(&mut bare.text)));
            if !done {
                self.bare = Some(bare);
            }
            return Ok(match (pending, item) {
                (Some(event), later) => {
                    self.ready = later;
                    Some(event)
                }
                (None, item) => item,
            });
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "" => {} // a comment
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            "id" => self.id = Some(value.to_owned()),
            _ => {} // `retry:` and unknown fields
        }
        let size = self.data.len() + self.event.as_ref().map_or(0, String::len);
        if size > self.max {
            return Err(SseError::TooLarge { limit: self.max });
        }
        Ok(None)
    }

    /// Ends the event being assembled: an item when it had data or a name, else nothing.
    fn dispatch(&mut self) -> Option<SseItem> {
        let id = self.id.take();
        if !self.has_data && self.event.is_none() {
            return None;
        }
        self.has_data = false;
        Some(SseItem::Event(SseEvent {
            event: self.event.take(),
            data: mem::take(&mut self.data),
            id,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unnamed event with `data`.
    fn ev(data: &str) -> SseItem {
        SseItem::Event(SseEvent {
            data: data.to_owned(),
            ..SseEvent::default()
        })
    }

    /// A named event.
    fn named(event: &str, data: &str) -> SseItem {
        SseItem::Event(SseEvent {
            event: Some(event.to_owned()),
            data: data.to_owned(),
            id: None,
        })
    }

    /// A bare body.
    fn bare(text: &str) -> SseItem {
        SseItem::Bare(text.to_owned())
    }

    /// Feeds `chunks` one push each, draining after every push, then finishes.
    fn parse_chunks<'a>(
        max: usize,
        chunks: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Vec<SseItem>, SseError> {
        let mut parser = SseParser::new(max);
        let mut items = Vec::new();
        for chunk in chunks {
            parser.push(chunk);
            while let Some(item) = parser.next_item()? {
                items.push(item);
            }
        }
        while let Some(item) = parser.finish()? {
            items.push(item);
        }
        Ok(items)
    }

    /// Parses `input` in one push and byte by byte, checks both agree, and returns the items.
    fn parse(input: &[u8]) -> Result<Vec<SseItem>, SseError> {
        parse_max(DEFAULT_MAX_EVENT_BYTES, input)
    }

    /// [`parse`] with another bound.
    fn parse_max(max: usize, input: &[u8]) -> Result<Vec<SseItem>, SseError> {
        let whole = parse_chunks(max, [input]);
        let bytewise = parse_chunks(max, input.chunks(1));
        assert_eq!(whole, bytewise, "one push and byte-by-byte differ");
        whole
    }

    #[test]
    fn data_events_at_blank_lines() {
        let items = parse(b"data: {\"a\":1}\n\ndata: {\"b\":2}\n\n").unwrap();
        assert_eq!(items, [ev("{\"a\":1}"), ev("{\"b\":2}")]);
    }

    #[test]
    fn one_optional_space_is_stripped() {
        let items = parse(b"data:x\n\ndata:  y\n\ndata:\n\n").unwrap();
        assert_eq!(items, [ev("x"), ev(" y"), ev("")]);
    }

    #[test]
    fn leading_bom_is_stripped_once() {
        let items = parse(b"\xEF\xBB\xBFdata: a\n\n").unwrap();
        assert_eq!(items, [ev("a")]);
        // A BOM alone is not an error, and a second one is kept (here: an unknown field).
        assert_eq!(parse(b"\xEF\xBB\xBF").unwrap(), []);
        let items = parse(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n").unwrap();
        assert_eq!(items, [ev("b")]);
    }

    #[test]
    fn crlf_and_cr_only_line_ends() {
        assert_eq!(
            parse(b"data: a\r\n\r\ndata: b\r\n\r\n").unwrap(),
            [ev("a"), ev("b")]
        );
        assert_eq!(
            parse(b"data: a\r\rdata: b\rdata: c\r\r").unwrap(),
            [ev("a"), ev("b\nc")]
        );
    }

    #[test]
    fn crlf_split_across_pushes_is_one_line_end() {
        // Were the `\n` taken as a second line end, the blank line would dispatch `a` alone.
        let items = parse_chunks(
            DEFAULT_MAX_EVENT_BYTES,
            [&b"data: a\r"[..], b"\ndata: b\r", b"\n\r", b"\n"],
        )
        .unwrap();
        assert_eq!(items, [ev("a\nb")]);
    }

    #[test]
    fn event_dispatched_on_a_trailing_cr_without_waiting() {
        let mut parser = SseParser::new(DEFAULT_MAX_EVENT_BYTES);
        parser.push(b"data: a\r\r");
        assert_eq!(parser.next_item().unwrap(), Some(ev("a")));
        assert_eq!(parser.next_item().unwrap(), None);
        parser.push(b"\ndata: b\n\n");
        assert_eq!(parser.next_item().unwrap(), Some(ev("b")));
    }

    #[test]
    fn multi_line_data_joined_with_newline() {
        let items = parse(b"data: one\ndata: two\ndata:three\n\n").unwrap();
        assert_eq!(items, [ev("one\ntwo\nthree")]);
    }

    #[test]
    fn event_and_id_kept_per_event() {
        let items =
            parse(b"event: response.created\nid: 7\ndata: {}\n\nevent: done\n\ndata: x\n\n")
                .unwrap();
        assert_eq!(
            items,
            [
                SseItem::Event(SseEvent {
                    event: Some("response.created".into()),
                    data: "{}".into(),
                    id: Some("7".into()),
                }),
                named("done", ""),
                ev("x"),
            ]
        );
    }

    #[test]
    fn comments_retry_and_unknown_fields_ignored() {
        let items = parse(b": keep-alive\n\n:\nretry: 10\nfoo: bar\nbare\ndata: a\n\n").unwrap();
        assert_eq!(items, [ev("a")]);
    }

    #[test]
    fn blank_lines_without_data_dispatch_nothing() {
        assert_eq!(parse(b"\n\n\nid: 3\n\n: c\n\n").unwrap(), []);
    }

    #[test]
    fn done_marker_is_an_ordinary_event() {
        assert_eq!(
            parse(b"data: {}\n\ndata: [DONE]\n\n").unwrap(),
            [ev("{}"), ev("[DONE]")]
        );
    }

    #[test]
    fn invalid_utf8_spoils_one_line_only() {
        let items = parse(b"data: a\xFF\xFEb\n\ndata: good \xC3\xA9\n\n").unwrap();
        assert_eq!(items, [ev("a\u{FFFD}\u{FFFD}b"), ev("good é")]);
        // A multi-byte character cut by a push boundary is not damaged.
        let items =
            parse_chunks(DEFAULT_MAX_EVENT_BYTES, [&b"data: \xC3"[..], b"\xA9\n\n"]).unwrap();
        assert_eq!(items, [ev("é")]);
    }

    #[test]
    fn last_event_without_blank_line_flushed_at_finish() {
        assert_eq!(parse(b"data: a\n\ndata: b\n").unwrap(), [ev("a"), ev("b")]);
        assert_eq!(parse(b"data: a\n\ndata: b").unwrap(), [ev("a"), ev("b")]);
        let mut parser = SseParser::new(DEFAULT_MAX_EVENT_BYTES);
        parser.push(b"data: tail");
        assert_eq!(parser.next_item().unwrap(), None);
        assert_eq!(parser.finish().unwrap(), Some(ev("tail")));
        assert_eq!(parser.finish().unwrap(), None);
    }

    #[test]
    fn bare_json_single_line() {
        let body = r#"{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}"#;
        let input = format!("data: {{\"a\":1}}\n\n{body}\n");
        assert_eq!(
            parse(input.as_bytes()).unwrap(),
            [ev("{\"a\":1}"), bare(body)]
        );
        // Without a line end after it, it still comes out at finish.
        assert_eq!(parse(body.as_bytes()).unwrap(), [bare(body)]);
    }

    #[test]
    fn bare_json_pretty_printed_with_brace_in_string() {
        let body = "{\n  \"error\": {\n    \"code\": 400,\n    \"message\": \"bad } and ] and \\\" {\",\n    \"details\": [\n      {}\n    ]\n  }\n}";
        let input = format!("{body}\ndata: after\n\n");
        assert_eq!(parse(input.as_bytes()).unwrap(), [bare(body), ev("after")]);
        let crlf = input.replace('\n', "\r\n");
        assert_eq!(parse(crlf.as_bytes()).unwrap(), [bare(body), ev("after")]);
    }

    #[test]
    fn bare_json_array_and_unbalanced_tail() {
        assert_eq!(
            parse(b"[{\"error\":{}}]\n").unwrap(),
            [bare("[{\"error\":{}}]")]
        );
        // A truncated body is returned as it is at the end of the stream, never swallowed.
        assert_eq!(
            parse(b"{\"error\":{\n\"code\":5").unwrap(),
            [bare("{\"error\":{\n\"code\":5")]
        );
    }

    #[test]
    fn bare_json_after_an_unterminated_event_keeps_order() {
        assert_eq!(
            parse(b"data: a\n{\"error\":1}\n").unwrap(),
            [ev("a"), bare("{\"error\":1}")]
        );
        assert_eq!(
            parse(b"data: a\n{\"error\":\n1}\n").unwrap(),
            [ev("a"), bare("{\"error\":\n1}")]
        );
    }

    #[test]
    fn too_large_line_event_and_bare_body() {
        let limit = 16;
        let err = SseError::TooLarge { limit };
        // A line without its end yet.
        assert_eq!(parse_max(limit, &[b'x'; 40]), Err(err.clone()));
        // A whole line.
        assert_eq!(
            parse_max(limit, b"data: 0123456789abcdef\n\n"),
            Err(err.clone())
        );
        // Data lines that are each small but add up.
        assert_eq!(
            parse_max(limit, b"data: 012345678\ndata: 012345678\n\n"),
            Err(err.clone())
        );
        // A bare body.
        assert_eq!(
            parse_max(limit, b"{\n\"a\": 1,\n\"b\": 2,\n\"c\": 3\n}\n"),
            Err(err.clone())
        );
        // At the limit is fine.
        assert_eq!(
            parse_max(limit, b"data: 0123456789\n\n").unwrap(),
            [ev("0123456789")]
        );
        // The parser is spent after an error.
        let mut parser = SseParser::new(limit);
        parser.push(&[b'x'; 40]);
        assert_eq!(parser.next_item(), Err(err.clone()));
        parser.push(b"\n\ndata: a\n\n");
        assert_eq!(parser.next_item(), Err(err));
    }

    #[test]
    fn provider_samples() {
        let gemini = b"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Opening\"}],\"role\":\"model\"},\"index\":0}]}\r\n\r\ndata: {\"candidates\":[{\"finishReason\":\"STOP\",\"index\":0}]}\r\n\r\n";
        assert_eq!(parse(gemini).unwrap().len(), 2);
        let openai = b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\"}\n\n";
        let items = parse(openai).unwrap();
        assert!(
            matches!(&items[1], SseItem::Event(e) if e.event.as_deref() == Some("response.completed"))
        );
    }

    /// A small deterministic PRNG (xorshift64*), so the property test needs no dependency.
    struct Rng(u64);

    impl Rng {
        /// The next 64 random bits.
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        /// A number in `0..n`.
        fn below(&mut self, n: usize) -> usize {
            usize::try_from(self.next() % n as u64).unwrap_or(0)
        }
    }

    /// A random valid stream and the items it must give.
    fn random_stream(rng: &mut Rng) -> (Vec<u8>, Vec<SseItem>) {
        const ALPHABET: &[&str] = &[
            "a", "b", " ", "{", "}", "\"", ":", "é", "日", "\u{FEFF}", "x",
        ];
        let eol = ["\n", "\r\n", "\r"][rng.below(3)];
        let mut out = String::new();
        if rng.below(4) == 0 {
            out.push('\u{FEFF}');
        }
        let mut expected = Vec::new();
        for _ in 0..rng.below(8) {
            if rng.below(5) == 0 {
                out.push_str(": comment");
                out.push_str(eol);
            }
            let event = (rng.below(3) == 0).then(|| format!("kind{}", rng.below(100)));
            if let Some(name) = &event {
                out.push_str(&format!("event: {name}{eol}"));
            }
            let mut lines = Vec::new();
            for _ in 0..=rng.below(3) {
                let line: String = (0..rng.below(12))
                    .map(|_| ALPHABET[rng.below(ALPHABET.len())])
                    .collect();
                out.push_str(&format!("data: {line}{eol}"));
                lines.push(line);
            }
            out.push_str(eol);
            expected.push(SseItem::Event(SseEvent {
                event,
                data: lines.join("\n"),
                id: None,
            }));
        }
        if rng.below(3) == 0 {
            let body = "{\"error\":{\"message\":\"a } in \\\"it\\\"\",\n \"code\":[1,{}]}}";
            out.push_str(&body.replace('\n', eol));
            expected.push(bare(body));
            if rng.below(2) == 0 {
                out.push_str(eol);
            }
        } else if rng.below(2) == 0 {
            out.push_str("data: last");
            expected.push(ev("last"));
        }
        (out.into_bytes(), expected)
    }

    #[test]
    fn random_splits_give_the_same_items() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..500 {
            let (input, expected) = random_stream(&mut rng);
            assert_eq!(parse(&input).unwrap(), expected, "input {input:?}");
            let mut cuts: Vec<usize> = (0..rng.below(6))
                .map(|_| rng.below(input.len() + 1))
                .collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut from = 0;
            for cut in cuts {
                chunks.push(&input[from..cut]);
                from = cut;
            }
            chunks.push(&input[from..]);
            let items = parse_chunks(DEFAULT_MAX_EVENT_BYTES, chunks.iter().copied()).unwrap();
            assert_eq!(items, expected, "input {input:?} split as {chunks:?}");
        }
    }
}
