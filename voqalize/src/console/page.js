"use strict";
// The console page: plays Voqalize's side of one call through the console's /ws socket. What
// goes over it is listed in the rustdoc of voqalize::console.

const params = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);
if (params.get("voice")) $("voice").value = params.get("voice");
if (params.get("wpm")) $("wpm").value = params.get("wpm");

let socket = null;
let units = new Map();   // speech_id -> unit
let queue = [];          // speech ids waiting to be played, oldest first
let playing = null;      // the unit being played
let watermark = 0;       // the highest turn interrupted
let newestTurn = 1;
let turns = new Map();   // turn_id -> element

// The controls that act on a live call, off once it is over.
const CALL_CONTROLS = ["say", "send", "mic", "barge", "end", "event-send"];

function status(state, text) {
  const s = $("status"); s.dataset.state = state; s.textContent = text;
  for (const id of CALL_CONTROLS) $(id).disabled = state === "closed" || state === "idle";
}

function connect() {
  for (const u of units.values()) stopVoice(u);
  units = new Map(); queue = []; playing = null; watermark = 0; newestTurn = 1; turns = new Map();
  $("timeline").replaceChildren();
  status("connecting", "connecting…");
  const mine = new WebSocket(`ws://${location.host}/ws`);
  socket = mine;
  // Events of a call replaced by "New call" are not this call's.
  mine.onmessage = (m) => { if (socket === mine) onEvent(JSON.parse(m.data)); };
  mine.onclose = () => {
    if (socket === mine && $("status").dataset.state !== "closed") status("closed", "call over");
  };
}

// The console takes messages of up to 64 KiB from the page.
const MAX_MESSAGE = 64 * 1024;

function send(message) {
  const text = JSON.stringify(message);
  if (new TextEncoder().encode(text).length > MAX_MESSAGE) {
    item(null, "notice", "console", `not sent: the message is over ${MAX_MESSAGE / 1024} KiB`);
    return;
  }
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(text);
}

function turnBox(turnId) {
  let box = turns.get(turnId);
  if (!box) {
    box = document.createElement("div");
    box.className = "turn"; box.dataset.turnId = turnId;
    const user = document.createElement("div"); user.className = "user";
    user.textContent = turnId === 1 ? "The call starts (greeting)" : `turn ${turnId}`;
    box.append(user);
    $("timeline").append(box);
    turns.set(turnId, box);
  }
  return box;
}

function item(turnId, cls, tag, text) {
  const el = document.createElement("div");
  el.className = "item " + cls;
  const t = document.createElement("span"); t.className = "tag"; t.textContent = tag;
  el.append(t, document.createTextNode(text));
  (turnId ? turnBox(turnId) : lastBox()).append(el);
  el.scrollIntoView({ block: "nearest" });
}

function lastBox() { return turnBox(newestTurn); }

function onEvent(e) {
  switch (e.type) {
    case "session": status("live", `live: ${e.session_id}`); break;
    case "turn": {
      newestTurn = Math.max(newestTurn, e.turn_id);
      // The greeting's turn gets a box only once something answers it.
      if (e.text !== null) turnBox(e.turn_id).querySelector(".user").textContent = "You: " + e.text;
      break;
    }
    case "speech_start": {
      const el = document.createElement("div");
      el.className = "unit"; el.dataset.speechId = e.speech_id; el.dataset.state = "queued";
      const tag = document.createElement("span"); tag.className = "tag"; tag.textContent = `unit ${e.speech_id}`;
      const heard = document.createElement("span"); heard.className = "heard";
      const unheard = document.createElement("span"); unheard.className = "unheard";
      el.append(tag, heard, unheard);
      turnBox(e.turn_id).append(el);
      const u = { id: e.speech_id, turn: e.turn_id, text: "", heard: 0, ended: false, done: false,
                  el, heardEl: heard, unheardEl: unheard, voice: null };
      units.set(u.id, u);
      if (u.turn <= watermark) { finalize(u, "cut"); break; } // a unit of a turn already cut
      queue.push(u.id);
      pump();
      break;
    }
    case "chunk": {
      const u = units.get(e.speech_id);
      if (!u || u.done) break;
      u.text += e.text; render(u); feed(u);
      break;
    }
    case "speech_end": {
      const u = units.get(e.speech_id);
      if (!u || u.done) break;
      u.ended = true; feed(u); maybeDone(u);
      break;
    }
    case "speech_cancel": {
      const u = units.get(e.speech_id);
      if (!u || u.done) break;
      item(u.turn, "", "SpeechCancel", `the brain cancelled unit ${u.id}`);
      finalize(u, "cut");
      break;
    }
    case "finalized": {
      const u = units.get(e.speech_id);
      if (u) { u.el.dataset.heard = e.heard; u.el.dataset.finalized = "true"; }
      break;
    }
    case "turn_step": {
      // A workflow's stage and its moves read as such: "Stage Verify", "Stage Verify → Booking".
      if (e.kind === "stage") { item(e.turn_id, "stage", "Stage", e.name); break; }
      if (e.kind === "transition") {
        const context = Object.keys(e.counts || {})[0];
        item(e.turn_id, "stage", "Stage", `${e.provider} → ${e.name}` + (context ? ` (${context})` : ""));
        break;
      }
      const parts = [`${e.kind} ${e.name}`];
      if (e.provider) parts.push(`(${e.provider})`);
      parts.push(`${e.duration_ms} ms`);
      if (e.first_output_ms !== null && e.first_output_ms !== undefined) parts.push(`first output ${e.first_output_ms} ms`);
      const counts = Object.entries(e.counts || {}).map(([k, v]) => `${k} ${v}`);
      if (counts.length) parts.push("· " + counts.join(", "));
      item(e.turn_id, "step", "TurnStep", parts.join(" "));
      break;
    }
    case "rtvi":
      item(e.turn_id, "rtvi", e.kind, JSON.stringify(e.data));
      break;
    case "tool":
      item(e.turn_id, "tool", e.ran ? "tool" : "tool (did not run)",
        `${e.name}(${JSON.stringify(e.arguments)}) → ${JSON.stringify(e.response)}${e.ran ? ` in ${e.duration_ms} ms` : ""}`);
      break;
    case "configure":
      item(null, "", "configure", `${e.config} (accepted)`);
      break;
    case "error":
      item(null, "error", `Error ${e.code}${e.fatal ? " (fatal)" : ""}`, e.message);
      break;
    case "app_event":
      item(null, "", "AppEvent", `${e.name} ${JSON.stringify(e.payload)}`);
      break;
    case "interrupted":
      item(e.through_turn, "", "Interruption", `through turn ${e.through_turn}`);
      break;
    case "end":
      item(null, "", "End", "the brain ended the call");
      status("closed", "the brain ended the call");
      break;
    case "ended_by_user":
      status("closed", "you ended the call");
      break;
    case "closed":
      item(null, "error", "closed", `${e.code ?? ""} ${e.reason}`.trim() || "the brain's socket closed");
      status("closed", "call over");
      break;
    case "notice":
      item(null, "notice", "console", e.text);
      break;
  }
}

function render(u) {
  u.heardEl.textContent = u.text.slice(0, u.heard);
  u.unheardEl.textContent = u.text.slice(u.heard);
  u.el.dataset.heardSoFar = u.text.slice(0, u.heard);
}

// Playout: one unit at a time, oldest first, as Voqalize plays them.
function pump() {
  while (!playing && queue.length) {
    const u = units.get(queue.shift());
    if (!u || u.done) continue;
    playing = u; u.el.dataset.state = "playing";
    u.voice = $("voice").value === "clock" || !browserVoice() ? clockVoice(u) : synthVoice(u);
    feed(u);
  }
}

function feed(u) { if (playing === u && u.voice) u.voice.more(); }

function maybeDone(u) {
  if (playing === u && u.ended && u.heard >= u.text.length && u.voice && u.voice.idle()) finalize(u, "heard");
}

// Sends the unit's Finalize with what was heard of it, and plays the next.
function finalize(u, state) {
  if (u.done) return;
  u.done = true;
  stopVoice(u);
  u.el.dataset.state = state;
  render(u);
  send({ type: "finalize", speech_id: u.id, heard: u.text.slice(0, u.heard) });
  if (playing === u) playing = null;
  queue = queue.filter((id) => id !== u.id);
  pump();
}

function stopVoice(u) { if (u.voice) { u.voice.stop(); u.voice = null; } }

// The user talks over the brain: Interruption, then the Finalize of every unit still owed,
// the one playing with what was heard of it, the ones not yet played with nothing.
function bargeIn() {
  const owed = [...units.values()].filter((u) => !u.done).sort((a, b) => a.id - b.id);
  if (!owed.length) return false;
  watermark = newestTurn;
  send({ type: "interrupt" });
  queue = [];
  for (const u of owed) finalize(u, "cut");
  return true;
}

function say(text) {
  text = text.trim();
  if (!text) return;
  bargeIn();
  send({ type: "say", text });
}

// The reading clock: one word every 60/wpm seconds; the word is heard once its time is up.
function clockVoice(u) {
  let timer = null;
  const perWord = () => 60000 / Math.max(20, Number($("wpm").value) || 170);
  const step = () => {
    timer = null;
    const rest = u.text.slice(u.heard);
    const word = rest.match(/^\s*\S+/);
    if (!word || (word[0].length === rest.length && !u.ended)) {
      // Nothing more to say yet (or the last word may still grow): wait for text.
      if (u.ended) { u.heard = u.text.length; render(u); maybeDone(u); }
      return;
    }
    u.heard += word[0].length;
    render(u);
    if (u.ended && u.heard >= u.text.trimEnd().length) { u.heard = u.text.length; render(u); maybeDone(u); return; }
    timer = setTimeout(step, perWord());
  };
  return {
    more() { if (!timer) timer = setTimeout(step, perWord()); },
    idle() { return timer === null; },
    stop() { if (timer) clearTimeout(timer); timer = null; },
  };
}

function browserVoice() {
  return "speechSynthesis" in window && speechSynthesis.getVoices().length > 0;
}

// The browser's speech synthesis, a sentence or a clause at a time as the text arrives; its
// word boundaries say how far the user has heard.
function synthVoice(u) {
  let queued = 0;    // text handed to the synthesizer so far
  let pending = 0;   // utterances not yet ended
  let stopped = false;
  const speakUpTo = (end) => {
    const start = queued;
    const piece = u.text.slice(start, end);
    queued = end;
    if (!piece.trim()) { u.heard = Math.max(u.heard, end); render(u); return; }
    const utterance = new SpeechSynthesisUtterance(piece);
    utterance.rate = Math.max(0.5, Math.min(2, (Number($("wpm").value) || 170) / 170));
    utterance.onboundary = (e) => {
      if (stopped || e.name !== "word") return;
      const len = e.charLength || (piece.slice(e.charIndex).match(/^\S*/)[0].length);
      u.heard = Math.max(u.heard, start + e.charIndex + len);
      render(u);
    };
    const over = () => {
      pending -= 1;
      if (stopped) return;
      u.heard = Math.max(u.heard, end);
      render(u);
      if (pending === 0) voice.more();
      maybeDone(u);
    };
    utterance.onend = over;
    // A voice that fails was not heard: the clock reads on from the last word it did say.
    utterance.onerror = () => {
      pending -= 1;
      if (stopped) return;
      voice.stop();
      item(u.turn, "notice", "console", "the browser's voice failed; the reading clock goes on");
      u.voice = clockVoice(u);
      u.voice.more();
    };
    pending += 1;
    speechSynthesis.speak(utterance);
  };
  const voice = {
    more() {
      if (stopped) return;
      const rest = u.text.slice(queued);
      let end = queued;
      if (u.ended) end = u.text.length;
      else {
        // A whole clause when there is one; whole words when the voice would otherwise fall silent.
        const clauses = [...rest.matchAll(/[.!?;,:]\s/g)];
        if (clauses.length) end = queued + clauses[clauses.length - 1].index + 2;
        else if (pending === 0 && rest.lastIndexOf(" ") > 0) end = queued + rest.lastIndexOf(" ") + 1;
      }
      if (end > queued) speakUpTo(end);
      else if (u.ended) maybeDone(u);
    },
    idle() { return pending === 0; },
    stop() { stopped = true; speechSynthesis.cancel(); },
  };
  return voice;
}

// Speech recognition where the browser has it: talking barges in; the final words are said.
const Recognition = window.SpeechRecognition || window.webkitSpeechRecognition;
if (Recognition) {
  $("mic").hidden = false;
  let listening = null;
  $("mic").onclick = () => {
    if (listening) { listening.stop(); return; }
    const r = new Recognition();
    r.interimResults = true; r.continuous = false;
    r.onspeechstart = () => bargeIn();
    r.onresult = (e) => {
      const last = e.results[e.results.length - 1];
      if (last.isFinal) say(last[0].transcript);
    };
    r.onerror = (e) => item(null, "notice", "console",
      `speech recognition failed (${e.error}): this browser may not recognise speech here; type instead`);
    r.onend = () => { listening = null; $("mic").textContent = "🎤 Speak"; };
    r.start();
    listening = r; $("mic").textContent = "■ Stop";
  };
}

$("send").onclick = () => { say($("say").value); $("say").value = ""; };
$("say").onkeydown = (e) => { if (e.key === "Enter") $("send").onclick(); };
$("barge").onclick = () => bargeIn();
$("end").onclick = () => { bargeIn(); send({ type: "end" }); };
$("restart").onclick = () => { if (socket) socket.close(); connect(); };
$("event-send").onclick = () => {
  const name = $("event-name").value.trim();
  if (!name) return;
  let payload = null;
  const raw = $("event-payload").value.trim();
  if (raw) {
    try { payload = JSON.parse(raw); } catch (err) { item(null, "error", "AppEvent", `the payload is not JSON: ${err.message}`); return; }
  }
  send({ type: "app_event", name, payload });
};
// Opened in a frame of another page (the console's headers forbid that; a browser that ignores
// them still runs this), the page dials only when the user presses New call: a site that frames
// it cannot open calls to the brain by being visited.
if (window.top === window.self) connect();
else status("idle", "in a frame: press New call to start a call");
