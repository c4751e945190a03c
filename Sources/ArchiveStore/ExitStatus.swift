/// An error a command reports as one sentence (its ``description``) and ends with ``exitStatus``.
///
/// Every error the library throws to a user conforms, so a command's `main` needs one `catch`.
public protocol ExitStatusError: Error, CustomStringConvertible {
    /// The process exit status for this failure: one of the ``ExitStatus`` values.
    var exitStatus: Int32 { get }
}

/// The exit statuses of `archive-sync`, documented in the README.
public enum ExitStatus {
    /// The command did what was asked.
    public static let success: Int32 = 0
    /// A check found a problem (verify, a skipped import), or the system failed (a full disk, an I/O error).
    public static let failure: Int32 = 1
    /// Bad usage or bad input: a flag, a key, a path, a file or bytes from outside were refused.
    public static let badInput: Int32 = 2
    /// Another process holds what the command needs (a running sync of the same store, the watch
    /// lease); nothing was changed, and the same command can be run again later.
    public static let busy: Int32 = 3
}
