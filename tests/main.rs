//! The integration tests of voqalize, in one test binary (one link, one process per run).
//!
//! Every test uses real parts: frames through the real codec, sessions over WebSockets on
//! 127.0.0.1 or the in-memory channel of `voqalize_testing`, real RS256 tokens.

mod auth;
mod clinic;
mod clinic_evals;
mod codec;
mod console;
mod console_guard;
mod corpus;
mod deploy;
mod drain_logs;
mod end_race;
mod endpoints;
mod eval_attacks;
mod evals_judge;
mod evals_suite;
mod failover;
mod failover_attacks;
mod hosting;
mod kit;
mod layer_attacks;
mod layer_kit;
mod listeners;
mod long_calls;
mod main_job;
mod mcp_attacks;
mod mcp_calls;
mod mcp_servers;
mod newuser_evals;
mod port;
mod provider_crossing;
mod recording_files;
mod relay;
mod relay_limits;
mod replay;
mod replay_turns;
mod request_schemas;
mod session;
mod stage_attacks;
mod stage_summaries;
mod stages;
mod support;
mod tool_attacks;
mod tool_lives;
mod tool_torture;
mod typescript;
mod voice;
mod voice_bounds;
mod voice_cases;
mod voice_stops;
mod wire_gen;
