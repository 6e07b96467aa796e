//! Stories of issue 30: add.

#[allow(unused_imports)]
use crate::common::*;
