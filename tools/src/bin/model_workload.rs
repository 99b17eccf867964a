//! The model-backed comparison workload: a model-backed `Brain` with a short instruction and no
//! tools, so every user message is one model request whose streamed answer is spoken. Against the
//! stand-in provider (`provider`) each answer is the workload's 41 words in 8 pieces. The Python
//! SDK's twin is `tools/python/model_brain.py`; `tools/scripts/compare-model` runs both under the
//! same load against one provider. It takes the model examples' flags (`examples/support/`).
//!
//! ```text
//! cargo run --release -p voqalize-tools --bin provider -- --listen 127.0.0.1:8790 &
//! GEMINI_API_KEY=x cargo run --release -p voqalize-tools --bin model_workload -- \
//!     --listen 127.0.0.1:8793 --allow-unverified --provider gemini \
//!     --base-url http://127.0.0.1:8790 --model workload
//! ```

use voqalize::prelude::*;
use voqalize_tools::model;

/// The instruction, the same as the Python twin's.
const INSTRUCTION: &str = "You are the front desk of a restaurant, on a voice call. Answer in \
two or three short spoken sentences.";

/// One call's brain: its voice core, which holds this call's conversation.
struct ModelWorkload {
    model: Model,
}

impl Brain for ModelWorkload {
    async fn on_user_message(&self, turn: &mut Turn, _: UserMessage) -> BrainResult {
        self.model.respond(self, turn).await
    }
}

#[brain]
impl ModelWorkload {}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (layer, host) = model::model_and_host();
    host.serve(move || ModelWorkload {
        model: Model::new(layer.clone()).instruction(INSTRUCTION),
    })
    .await
}
