//! Which request paths match: what the replay's stand-in and its report share.

/// Whether a request to `path` can be the recorded one to `recorded`: the same path, or one the
/// end of the other (the layer's base URL in the replay has no path of its own, or another one).
pub(super) fn same_path(path: &str, recorded: &str) -> bool {
    path == recorded || recorded.ends_with(path) || path.ends_with(recorded)
}

#[cfg(test)]
mod tests {
    use super::same_path;

    #[test]
    fn a_path_matches_its_recorded_one_under_another_base() {
        assert!(same_path(
            "/v1beta/models/m:streamGenerateContent",
            "/v1beta/models/m:streamGenerateContent"
        ));
        assert!(same_path("/responses", "/v1/responses"));
        assert!(!same_path("/v1/chat/completions", "/v1/responses"));
    }
}
