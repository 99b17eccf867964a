//! How the clinic's desk model is played with no key and no network (`--provider offline`): a
//! few rules, by the stage the request is in (read from the tools it declares), the caller's last
//! words and the results it reads. Shared by `examples/clinic.rs`, `examples/clinic_evals.rs` and
//! the voqalize tests `tests/clinic_evals.rs` (included by path): it uses the testing kit, serde_json
//! and std only.

use voqalize_testing::{ReadBack, Reply, Said};

/// How `--provider offline` plays the model, with no key and no network: by the stage the request
/// is in (read from the tools it declares), the caller's last words and the results it reads.
pub fn desk(request: &ReadBack) -> Reply {
    let has = |tool: &str| request.tools.iter().any(|t| t == tool);
    if has("find_patient") {
        verify(request)
    } else if has("open_slots") {
        booking(request)
    } else if has("send_reminder") {
        confirm(request)
    } else {
        Reply::new()
            .text("Thank you for calling the Elm Street Clinic. Goodbye!")
            .finish()
    }
}

/// Verify: look the caller up, then move the call on with the patient `find_patient` gave.
fn verify(request: &ReadBack) -> Reply {
    match answered(request) {
        Some(("find_patient", Ok(patient))) => {
            let name = patient["name"].as_str().unwrap_or_default();
            let first = name.split_whitespace().next().unwrap_or(name);
            return Reply::new()
                .text(&format!("Thank you, {first}."))
                .call("verified", patient)
                .finish();
        }
        Some(("find_patient", Err(_))) => {
            return Reply::new()
                .text(
                    "I can't find you with that name and date of birth. Could you say them \
                     again, the date as year, month, day?",
                )
                .finish();
        }
        Some(("verified", Err(_))) => {
            return Reply::new()
                .text("Sorry, I couldn't check that. Your name and date of birth once more?")
                .finish();
        }
        _ => {}
    }
    match caller(request).as_deref().and_then(name_and_birth) {
        Some((name, date_of_birth)) => Reply::new()
            .call(
                "find_patient",
                voqalize::json!({"name": name, "date_of_birth": date_of_birth}),
            )
            .finish(),
        None => Reply::new()
            .text(
                "Elm Street Clinic, hello. May I have your full name and date of birth, as \
                 year, month, day?",
            )
            .finish(),
    }
}

/// Booking: list the open slots, then book the one whose day the caller named last ("Tuesday,
/// no, Friday" books Friday), at once when the caller named one before the slots were listed.
fn booking(request: &ReadBack) -> Reply {
    let slots = result_of(request, "open_slots")
        .and_then(|r| r.ok())
        .and_then(|v| serde_json::from_value::<Vec<String>>(v).ok());
    let heard = caller(request).unwrap_or_default().to_lowercase();
    let picked = slots.as_deref().and_then(|slots| named_last(slots, &heard));
    match (answered(request), &slots, picked) {
        (Some(("open_slots", _)), _, Some(slot)) => return book(slot),
        (Some(("open_slots", _)), Some(slots), None) => {
            return Reply::new()
                .text(&format!("I have {}. Which suits you?", spoken(slots)))
                .finish();
        }
        (Some(("booked", Err(_))), Some(slots), _) => {
            return Reply::new()
                .text(&format!(
                    "Sorry, that one isn't open. I have {}.",
                    spoken(slots)
                ))
                .finish();
        }
        _ => {}
    }
    let Some(slots) = &slots else {
        return Reply::new()
            .call("open_slots", voqalize::json!({}))
            .finish();
    };
    if heard.contains("someone else") || heard.contains("not me") {
        return Reply::new()
            .text("Of course.")
            .call("wrong_caller", voqalize::json!({}))
            .finish();
    }
    match picked {
        Some(slot) => book(slot),
        None => Reply::new()
            .text(&format!("Which day suits you: {}?", spoken(slots)))
            .finish(),
    }
}

/// A call of `booked` for `slot`.
fn book(slot: &str) -> Reply {
    Reply::new()
        .call("booked", voqalize::json!({ "slot": slot }))
        .finish()
}

/// The slot whose day comes last in `heard` (lowercase words).
fn named_last<'a>(slots: &'a [String], heard: &str) -> Option<&'a str> {
    slots
        .iter()
        .filter_map(|slot| {
            let day = slot.split_whitespace().next()?.to_lowercase();
            heard.rfind(&day).map(|at| (at, slot.as_str()))
        })
        .max_by_key(|(at, _)| *at)
        .map(|(_, slot)| slot)
}

/// Confirm: read the booking back, send the reminder, say goodbye.
fn confirm(request: &ReadBack) -> Reply {
    if result_of(request, "send_reminder").is_some() {
        return Reply::new().text("You're all set. Goodbye!").finish();
    }
    let booking = result_of(request, "booked")
        .and_then(|r| r.ok())
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "You're booked.".to_owned());
    Reply::new()
        .text(&format!(
            "{booking} I'm sending you a text reminder. Thank you for calling, goodbye!"
        ))
        .call("send_reminder", voqalize::json!({}))
        .finish()
}

/// The call the request's last item answers and its result (`Ok`) or error (`Err`), when the
/// request ends with one.
fn answered(request: &ReadBack) -> Option<(&str, Result<serde_json::Value, String>)> {
    let Some(Said::Result { output, .. }) = request.said.last() else {
        return None;
    };
    let name = request.said.iter().rev().find_map(|s| match s {
        Said::Call { name, .. } => Some(name.as_str()),
        _ => None,
    })?;
    Some((name, outcome(output)))
}

/// The result of the last call to `tool` in the request, if it has one.
fn result_of(request: &ReadBack, tool: &str) -> Option<Result<serde_json::Value, String>> {
    let called = request
        .said
        .iter()
        .rposition(|s| matches!(s, Said::Call { name, .. } if name == tool))?;
    request.said[called..].iter().find_map(|s| match s {
        Said::Result { output, .. } => Some(outcome(output)),
        _ => None,
    })
}

/// A filed result's `{"result": ..}` or `{"error": ..}`.
fn outcome(output: &str) -> Result<serde_json::Value, String> {
    let value: serde_json::Value = serde_json::from_str(output).map_err(|e| e.to_string())?;
    match value.get("result") {
        Some(result) => Ok(result.clone()),
        None => Err(value["error"].as_str().unwrap_or("failed").to_owned()),
    }
}

/// The caller's last words.
fn caller(request: &ReadBack) -> Option<String> {
    request.said.iter().rev().find_map(|s| match s {
        Said::User(text) => Some(text.clone()),
        _ => None,
    })
}

/// A name and a YYYY-MM-DD date out of words like "I'm Ana Lima, born 1984-03-12".
fn name_and_birth(text: &str) -> Option<(String, String)> {
    const FILLER: &[&str] = &[
        "hi", "hello", "i'm", "im", "i", "am", "this", "is", "my", "name", "it's", "and", "born",
        "on", "the",
    ];
    let words: Vec<&str> = text.split_whitespace().collect();
    let digits = |w: &str| w.trim_matches(|c: char| !c.is_ascii_digit()).to_owned();
    let at = words.iter().position(|w| is_date(&digits(w)))?;
    let name: Vec<&str> = words[..at]
        .iter()
        .map(|w| w.trim_matches(|c: char| !c.is_alphabetic() && c != '\''))
        .filter(|w| !w.is_empty() && !FILLER.contains(&w.to_lowercase().as_str()))
        .collect();
    (!name.is_empty()).then(|| (name.join(" "), digits(words[at])))
}

/// Whether `word` reads as YYYY-MM-DD.
fn is_date(word: &str) -> bool {
    let b = word.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
}

/// Slots as said: "Tuesday 10:00, Wednesday 15:30 or Friday 09:00".
fn spoken(slots: &[String]) -> String {
    match slots {
        [] => "nothing open this week".to_owned(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// How `--provider offline` plays the evals' simulated caller: by the facts its instruction
/// lists (`- name: Ben Okafor`, `- date_of_birth: 1990-11-02`, `- day: Wednesday`) and what it
/// last heard the desk say. It hangs up with its goal met once the desk says goodbye, and gives
/// up after asking twice for something it did not follow.
#[allow(dead_code)] // the evals' (examples/clinic_evals.rs), not the clinic example's
pub fn simulated_caller(request: &ReadBack) -> Reply {
    let fact = |key: &str| fact(request.instruction.as_deref().unwrap_or_default(), key);
    let heard = request
        .said
        .iter()
        .rev()
        .find_map(|s| match s {
            Said::User(text) => Some(text.to_lowercase()),
            _ => None,
        })
        .unwrap_or_default();
    let line = if heard.contains("goodbye") {
        "Thanks, bye! [hang up: goal met]".to_owned()
    } else if heard.contains("date of birth") || heard.contains("can't find") {
        format!("I'm {}, born {}.", fact("name"), fact("date_of_birth"))
    } else if heard.contains("which suits you") || heard.contains("which day") {
        format!("{} please.", fact("day"))
    } else {
        let asked = request
            .said
            .iter()
            .filter(|s| matches!(s, Said::Model(t) if t.starts_with("Sorry, could you")))
            .count();
        if asked >= 2 {
            "Never mind, I'll call back. [hang up: gave up]".to_owned()
        } else {
            "Sorry, could you say that again?".to_owned()
        }
    };
    Reply::new()
        .text(&line)
        .usage(tokens(request), (line.len() / 4).max(1) as u64)
        .finish()
}

/// About how many tokens `request` holds (a byte in four), for the stand-ins' usage.
#[allow(dead_code)] // as `simulated_caller`
fn tokens(request: &ReadBack) -> u64 {
    let said: usize = request
        .said
        .iter()
        .map(|s| match s {
            Said::User(t) | Said::Model(t) => t.len(),
            _ => 0,
        })
        .sum();
    let instruction = request.instruction.as_deref().map_or(0, str::len);
    ((said + instruction) / 4).max(1) as u64
}

/// The value of `- key: value` in `instruction` (empty when it lists none).
#[allow(dead_code)] // as `simulated_caller`
fn fact(instruction: &str, key: &str) -> String {
    let prefix = format!("- {key}:");
    instruction
        .lines()
        .find_map(|l| l.trim().strip_prefix(&prefix))
        .map(|v| v.trim().to_owned())
        .unwrap_or_default()
}

/// How `--provider offline` plays the evals' judge: each rubric item names, in double quotes,
/// words the call must hold (`The desk confirms the slot, saying "Booked Wednesday 15:30"`). It
/// passes when the call holds every one (quoting them), and fails quoting the desk's last line
/// otherwise.
#[allow(dead_code)] // the evals' (examples/clinic_evals.rs), not the clinic example's
pub fn judge(request: &ReadBack) -> Reply {
    let asked = request
        .said
        .iter()
        .find_map(|s| match s {
            Said::User(text) => Some(text.as_str()),
            _ => None,
        })
        .unwrap_or_default();
    let (rubric, call) = asked.split_once("The call:").unwrap_or((asked, ""));
    let wanted: Vec<&str> = rubric
        .lines()
        .filter_map(|item| item.split('"').nth(1))
        .collect();
    let lower = call.to_lowercase();
    let missing: Vec<&&str> = wanted
        .iter()
        .filter(|w| !lower.contains(&w.to_lowercase()))
        .collect();
    let answer = if let Some(first) = missing.first() {
        let last = call
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("agent: "))
            .map(|l| l.split(" [unheard").next().unwrap_or(l))
            .unwrap_or_default();
        serde_json::json!({
            "verdict": "fail",
            "reasons": [{"item": format!("says \"{first}\""), "quote": last,
                         "why": format!("the call never says \"{first}\"")}],
        })
    } else {
        let reasons: Vec<serde_json::Value> = wanted
            .iter()
            .map(
                |w| serde_json::json!({"item": format!("says \"{w}\""), "quote": w, "why": "said"}),
            )
            .collect();
        serde_json::json!({"verdict": "pass", "reasons": reasons})
    };
    let answer = answer.to_string();
    Reply::new()
        .text(&answer)
        .usage(tokens(request), (answer.len() / 4).max(1) as u64)
        .finish()
}
