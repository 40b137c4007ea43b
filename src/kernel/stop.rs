//! Stopping the machine on purpose: checked mode's stop at a consumer
//! breach (`provider::checked`, `docs/debugging.md`). In the kernel a bug
//! check (`KeBugCheckEx`) with the caller's code and four parameters, so the
//! crash dump shows the breach at its source; on the host an abort.

/// Stops the machine with bug-check `code` and its four parameters. Any
/// IRQL; never returns.
pub fn bug_check(code: u32, parameters: [usize; 4]) -> ! {
    super::backend::bug_check_ex(code, parameters)
}
