//! Outside a turn, a tool has no session to reach (`self.session()` is a clear panic). The case
//! inside a turn runs against the testing kit's driver, in `tests/kit.rs`.

use super::*;

#[test]
#[should_panic(expected = "self.session() was called outside a session")]
fn outside_a_session_the_session_is_a_clear_panic() {
    let _ = private::current_session();
}
