//! The judge: what a run recorded, and what it means.
//!
//! The world records a run in true time ([`history`], and for the diagrams [`recording`]);
//! [`judgement`] judges mutual exclusion and what the protected resource applied under each
//! resource mode; [`report`] holds the verdicts against the scenario's expectations.
//!
//! | file | job |
//! |---|---|
//! | `history.rs` | leases, accesses, keys and outcomes in true time |
//! | `recording.rs` | a traced run's messages and clock readings |
//! | `judgement.rs` | the verdicts: overlaps of holders' windows, the fate of each access |
//! | `report.rs` | verdicts against expectations, counts, and their tables |

pub mod history;
pub mod judgement;
pub mod recording;
pub mod report;
