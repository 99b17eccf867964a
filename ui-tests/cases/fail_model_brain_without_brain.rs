// A model-backed brain hands itself to `Model::respond`, which needs its tool table: forgetting
// `#[brain]` must say so, once. (The fixture is built without the `model` feature, so the brain is
// cast here as `respond` casts it.)
use voqalize::tools::Toolbox;

struct Coach;

fn respond(_brain: &dyn Toolbox) {}

fn main() {
    respond(&Coach);
}
