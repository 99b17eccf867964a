//! The comparison workload's answer: the `workload` brain and the `floor` speak it, the stand-in
//! `provider` streams it as a model's answer; the Python twins (`tools/python/`) carry the same
//! text.

/// 8 chunks, 41 words in all.
pub const CHUNKS: [&str; 8] = [
    "Thanks for calling, I heard you ",
    "and I am looking at your account, ",
    "so give me a moment ",
    "to check your booking for tonight ",
    "and the table you asked for. ",
    "Everything is in order, ",
    "the reservation is confirmed, ",
    "see you soon.",
];
