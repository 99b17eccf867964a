//! The error collector of one macro invocation (serde_derive's `Ctxt`).
//!
//! Checks push their errors here and carry on, so every mistake in the input is reported at once.
//! [`Ctxt::check`] hands back the combined error; dropping a `Ctxt` without calling it panics,
//! because errors that were collected and never reported would be a bug in this crate (tests
//! catch it; user input never reaches that panic).

use std::cell::RefCell;
use std::fmt::Display;
use std::thread;

use quote::ToTokens;

/// Collects errors; `check` reports them.
pub(crate) struct Ctxt {
    /// `None` once `check` has run.
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    pub(crate) fn new() -> Self {
        Ctxt {
            errors: RefCell::new(Some(Vec::new())),
        }
    }

    /// An error on the span of `tokens`.
    pub(crate) fn error_spanned_by<T: ToTokens>(&self, tokens: T, message: impl Display) {
        self.syn_error(syn::Error::new_spanned(tokens.into_token_stream(), message));
    }

    /// An error syn already built (a parse error, or one with a plain span).
    pub(crate) fn syn_error(&self, error: syn::Error) {
        self.errors
            .borrow_mut()
            .as_mut()
            .expect("Ctxt used after check")
            .push(error);
    }

    /// Ends collection: `Err` with every error, in the order they were found, if there was any.
    pub(crate) fn check(self) -> syn::Result<()> {
        let mut errors = self
            .errors
            .borrow_mut()
            .take()
            .expect("Ctxt checked twice")
            .into_iter();
        let Some(mut combined) = errors.next() else {
            return Ok(());
        };
        for rest in errors {
            combined.combine(rest);
        }
        Err(combined)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        if !thread::panicking() && self.errors.borrow().is_some() {
            panic!("voqalize-macros bug: a Ctxt was dropped without `check()`");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proc_macro2::Span;

    #[test]
    fn check_reports_every_error_in_order() {
        let ctxt = Ctxt::new();
        ctxt.error_spanned_by(quote::quote!(a), "first");
        ctxt.syn_error(syn::Error::new(Span::call_site(), "second"));
        let messages: Vec<String> = ctxt
            .check()
            .unwrap_err()
            .into_iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(messages, ["first", "second"]);
        assert!(Ctxt::new().check().is_ok());
    }

    #[test]
    #[should_panic(expected = "without `check()`")]
    fn a_forgotten_check_is_a_bug() {
        let ctxt = Ctxt::new();
        ctxt.error_spanned_by(quote::quote!(a), "never reported");
    }
}
