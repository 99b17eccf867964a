//! `#[derive(Stages)]`: a call's workflow stages on a fieldless enum.

use proc_macro2::TokenStream;

pub(crate) fn expand(input: TokenStream) -> TokenStream {
    let _ = input;
    TokenStream::new()
}
