//! Wire version 3: the frames, the deprecated catalogs, `Config`, and the codec.
//!
//! One WebSocket binary message carries one protobuf `Envelope` (generated into [`crate::proto`]
//! from `proto/voqalize/frames/frames.proto`). This module is the only place that maps between
//! those generated types and the values the rest of the SDK uses.

mod catalog;
mod codec;
mod config;
mod frames;

pub use catalog::{Language, Voice};
pub use codec::{WireError, decode, decode_limited, decode_strict, encode};
pub use config::{
    Config, ConfigBuilder, ConfigError, IdleConfig, LanguageChoice, SttConfig, TtsConfig,
    VoiceChoice,
};
pub use frames::{
    Capabilities, Capability, ErrorCode, ErrorFrame, Frame, Response, Rtvi, RtviType, SessionStart,
    TurnStep, UserIdle, UserMessage,
};
pub(crate) use frames::{FRAME_WEIGHT, clip};

/// The wire version this SDK speaks; a `SessionStart` with any other is refused.
pub const WIRE_VERSION: u32 = 3;
