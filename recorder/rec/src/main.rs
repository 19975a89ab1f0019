//! rec
fn main() {}
