//! Surviving a panic: a brain callback or tool that panics is caught at its task boundary, and the
//! locks it may have held are still usable afterwards.

use std::any::Any;
use std::sync::{Mutex, MutexGuard};

/// Locks `m`, recovering it if a panicking thread poisoned it.
///
/// Every lock in the SDK guards a few map or queue operations that cannot leave the state
/// half-written, so a poisoned lock still holds consistent data: refusing it would turn one
/// panicking callback into a dead session.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The message of a caught panic (`panic!("..")` payloads are `&str` or `String`), or a fixed text
/// for any other payload.
pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> &str {
    if let Some(s) = panic.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "a panic without a message"
    }
}

/// `panicked: <message>`, how logs and fatal `Error` frames name a caught panic.
pub(crate) fn panic_text(panic: &(dyn Any + Send)) -> String {
    format!("panicked: {}", panic_message(panic))
}
