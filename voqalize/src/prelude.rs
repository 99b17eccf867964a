//! Every name a brain file needs: `use voqalize::prelude::*;`.

pub use crate::actions::{Action, AppEvent, parse_app_event};
pub use crate::brain::{Brain, BrainError, BrainResult, MakeBrain, fallible};
pub use crate::host::{HostError, HostOptions, Upgrade, run_session};
pub use crate::json;
#[cfg(feature = "model")]
pub use crate::model::{Anthropic, Chat, Gemini, Interactions, OpenAi};
pub use crate::session::{
    AnswerPart, EndReason, Finalized, HeardHistory, HeardLines, Session, SessionError, SpeechUnit,
    Step, Turn,
};
pub use crate::tools::prelude::*;
#[cfg(feature = "model")]
pub use crate::voice::{Breaker, Fallback, GuardedCall, Model, Refusal, ToolChoice, Workflow};
pub use crate::wire::{
    Capability, Config, ErrorCode, ErrorFrame, Language, Rtvi, RtviType, UserIdle, UserMessage,
    Voice,
};
