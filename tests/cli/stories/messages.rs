//! Stories of issue 30: messages.

#[allow(unused_imports)]
use crate::common::*;
