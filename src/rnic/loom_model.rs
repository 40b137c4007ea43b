//! The loom models' one way to check a model.

/// Checks `f` over every interleaving with at most two preemptions (the
/// bound the models share: wider takes minutes and has found nothing more).
pub(crate) fn bounded(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(f);
}
