//! Stories of issue 30: restore.

#[allow(unused_imports)]
use crate::common::*;
