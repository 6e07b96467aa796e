//! Where features meet (issue 30): each story a new user broke in an hour,
//! reproduced through the binary. One module per area.

mod add;
mod messages;
mod remote;
mod restore;
mod status;
