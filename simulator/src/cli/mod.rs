//! The binary's commands that have grown beyond a few lines (the library holds the logic;
//! these read arguments, run it, and print).

pub(crate) mod check;
pub(crate) mod explain;
pub(crate) mod merge;
pub(crate) mod run;
pub(crate) mod scenarios;
pub(crate) mod sweep;
