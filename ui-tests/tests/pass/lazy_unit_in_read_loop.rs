//! `Turn::open_unit` takes `&self`, so the natural read loop of a streamed answer compiles: the
//! unit is opened lazily on the first piece, inside the loop, and written to on every piece. (When
//! `open_unit` took `&mut self`, this was E0499: `*turn` borrowed mutably twice.)

use voqalize::prelude::*;

/// Stands in for a model's streamed answer: an async read of the next text piece.
struct Pieces(std::vec::IntoIter<String>);

impl Pieces {
    async fn next(&mut self) -> Option<String> {
        self.0.next()
    }
}

struct Streamer;

impl Brain for Streamer {
    async fn on_user_message(&self, turn: &mut Turn, message: UserMessage) -> BrainResult {
        let pieces: Vec<String> = message
            .text
            .split_inclusive(' ')
            .map(str::to_owned)
            .collect();
        let mut stream = Pieces(pieces.into_iter());
        let mut unit = None;
        while let Some(piece) = stream.next().await {
            let unit = unit.get_or_insert_with(|| turn.open_unit());
            unit.write(&piece);
        }
        if let Some(unit) = unit {
            unit.close();
        }
        Ok(())
    }
}

fn serves<B: Brain>(factory: impl Fn() -> B) -> B {
    factory()
}

#[test]
fn compiles_and_runs() {
    let _ = serves(|| Streamer);
}
