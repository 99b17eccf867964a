//! A [`SuiteReport`] as JUnit XML for CI: `testsuites` > a `testsuite` per scenario > a
//! `testcase` per run, with a `failure` saying why a run failed and the transcript in
//! `system-out`. Every text is escaped here (no XML library), and bounded.

use std::fmt::Write as _;

use super::report::{RunReport, ScenarioReport, SuiteReport, clip, seconds};

/// The most bytes of a run's transcript put in its `<system-out>`, before escaping: 64 KiB; the
/// rest is cut and marked.
pub const MAX_JUNIT_OUT_BYTES: usize = 64 * 1024;

/// The most bytes of a scenario's name in its `testsuite` and each `testcase`, before escaping.
const MAX_NAME_BYTES: usize = 256;

/// The most bytes of a failure's `message` attribute, before escaping.
const MAX_MESSAGE_BYTES: usize = 1024;

/// The most bytes of a failure's body, before escaping.
const MAX_FAILURE_BYTES: usize = 16 * 1024;

impl SuiteReport {
    /// The report as JUnit XML, for CI: `<testsuites>` holding one `<testsuite>` per scenario
    /// holding one `<testcase>` per run (`time` in seconds), a failed run with a `<failure>`
    /// saying why, every run's transcript in `<system-out>` (at most
    /// [`MAX_JUNIT_OUT_BYTES`](super::MAX_JUNIT_OUT_BYTES) of it). Every text is escaped, and
    /// characters XML 1.0 forbids are dropped.
    pub fn junit_xml(&self) -> String {
        render(self)
    }
}

/// The report as JUnit XML.
fn render(report: &SuiteReport) -> String {
    let runs: usize = report.scenarios.iter().map(|s| s.runs.len()).sum();
    let failures: usize = report
        .scenarios
        .iter()
        .map(|s| s.runs.len() - s.passed_runs())
        .sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"voqalize evals\" tests=\"{runs}\" failures=\"{failures}\" \
         errors=\"0\" time=\"{:.3}\">",
        seconds(report.wall_ms)
    );
    for scenario in &report.scenarios {
        suite(&mut out, scenario);
    }
    out.push_str("</testsuites>\n");
    out
}

/// One scenario's `<testsuite>`.
fn suite(out: &mut String, scenario: &ScenarioReport) {
    let time: u64 = scenario.runs.iter().map(|r| r.wall_ms).sum();
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" time=\"{:.3}\">",
        escape(&clip(&scenario.name, MAX_NAME_BYTES)),
        scenario.runs.len(),
        scenario.runs.len() - scenario.passed_runs(),
        seconds(time)
    );
    let _ = writeln!(
        out,
        "    <properties><property name=\"pass_rate\" value=\"{:.3}\"/><property \
         name=\"required_pass_rate\" value=\"{:.3}\"/><property name=\"passed\" \
         value=\"{}\"/></properties>",
        scenario.pass_rate, scenario.required_pass_rate, scenario.passed
    );
    let total = scenario.runs.len();
    for run in &scenario.runs {
        case(out, &clip(&scenario.name, MAX_NAME_BYTES), total, run);
    }
    out.push_str("  </testsuite>\n");
}

/// One run's `<testcase>`.
fn case(out: &mut String, scenario: &str, total: usize, run: &RunReport) {
    let _ = writeln!(
        out,
        "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\">",
        escape(scenario),
        escape(&format!(
            "run {} of {total} (seed {})",
            run.repetition, run.seed
        )),
        seconds(run.wall_ms)
    );
    if !run.passed {
        let message = run.problems.join("; ");
        let _ = writeln!(
            out,
            "      <failure message=\"{}\" type=\"eval\">{}</failure>",
            escape(&clip(&message, MAX_MESSAGE_BYTES)),
            escape(&clip(&run.failure_text(), MAX_FAILURE_BYTES))
        );
    }
    let _ = writeln!(
        out,
        "      <system-out>{}</system-out>",
        escape(&clip(&run.call_text(), MAX_JUNIT_OUT_BYTES))
    );
    out.push_str("    </testcase>\n");
}

/// `text` escaped for XML 1.0 text and attribute values: `&`, `<`, `>`, `"` and `'` as entities,
/// tab, newline and carriage return as character references (so attributes keep them), and every
/// character XML 1.0 forbids (other control characters, U+FFFE, U+FFFF) dropped.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c if allowed(c) => out.push(c),
            _ => {}
        }
    }
    out
}

/// A character XML 1.0 allows: `#x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] |
/// [#x10000-#x10FFFF]` (a `char` is never a surrogate).
fn allowed(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_turns_markup_into_entities_and_drops_what_xml_forbids() {
        assert_eq!(
            escape(r#"<a href="x">Tom & 'Jerry'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &apos;Jerry&apos;&lt;/a&gt;"
        );
        assert_eq!(
            escape("a\u{0}b\u{1b}[31mc\u{7}d\u{b}e\u{c}\u{ffff}\u{fffe}"),
            "ab[31mcde"
        );
        assert_eq!(escape("one\ttwo\nthree\r"), "one&#9;two&#10;three&#13;");
        assert_eq!(
            escape("héllo 🙂 \u{7f}"),
            "héllo 🙂 \u{7f}",
            "DEL is allowed in XML 1.0"
        );
    }

    #[test]
    fn escaped_text_holds_no_markup() {
        let nasty = "]]><x/>&<!-- --><?pi?>\"'";
        let e = escape(nasty);
        assert!(!e.contains('<') && !e.contains('>') && !e.contains('"') && !e.contains('\''));
        assert_eq!(
            e.matches('&').count(),
            e.matches(';').count(),
            "every & starts an entity: {e}"
        );
    }
}
