//! Macros for voqalize. Use them through `voqalize::prelude::*`.
