//! Stories of issue 30: remote.

#[allow(unused_imports)]
use crate::common::*;
