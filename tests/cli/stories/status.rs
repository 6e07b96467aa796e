//! Stories of issue 30: status.

#[allow(unused_imports)]
use crate::common::*;
