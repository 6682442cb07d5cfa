//! Errno names, for policy files and audit records. Numbers from
//! `asm-generic/errno-base.h` and `errno.h` via the `libc` crate.

/// (name, number) for the errnos a policy may name or an audit record shows.
pub const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("ESRCH", libc::ESRCH),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("E2BIG", libc::E2BIG),
    ("EBADF", libc::EBADF),
    ("ECHILD", libc::ECHILD),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EFAULT", libc::EFAULT),
    ("EBUSY", libc::EBUSY),
    ("EEXIST", libc::EEXIST),
    ("EXDEV", libc::EXDEV),
    ("ENODEV", libc::ENODEV),
    ("ENOTDIR", libc::ENOTDIR),
    ("EISDIR", libc::EISDIR),
    ("EINVAL", libc::EINVAL),
    ("ENFILE", libc::ENFILE),
    ("EMFILE", libc::EMFILE),
    ("ETXTBSY", libc::ETXTBSY),
    ("EFBIG", libc::EFBIG),
    ("ENOSPC", libc::ENOSPC),
    ("EROFS", libc::EROFS),
    ("EMLINK", libc::EMLINK),
    ("EPIPE", libc::EPIPE),
    ("ERANGE", libc::ERANGE),
    ("ENAMETOOLONG", libc::ENAMETOOLONG),
    ("ENOSYS", libc::ENOSYS),
    ("ENOTEMPTY", libc::ENOTEMPTY),
    ("ELOOP", libc::ELOOP),
    ("ENOTSOCK", libc::ENOTSOCK),
    ("EDESTADDRREQ", libc::EDESTADDRREQ),
    ("EMSGSIZE", libc::EMSGSIZE),
    ("EPROTOTYPE", libc::EPROTOTYPE),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("EAFNOSUPPORT", libc::EAFNOSUPPORT),
    ("EADDRINUSE", libc::EADDRINUSE),
    ("EADDRNOTAVAIL", libc::EADDRNOTAVAIL),
    ("ENETUNREACH", libc::ENETUNREACH),
    ("ECONNREFUSED", libc::ECONNREFUSED),
    ("EHOSTUNREACH", libc::EHOSTUNREACH),
    ("EISCONN", libc::EISCONN),
    ("ENOTCONN", libc::ENOTCONN),
    ("ETIMEDOUT", libc::ETIMEDOUT),
    ("EINPROGRESS", libc::EINPROGRESS),
    ("EALREADY", libc::EALREADY),
];

/// The number of an errno name ("EPERM" → 1); `None` if unknown.
pub fn from_name(name: &str) -> Option<i32> {
    ERRNOS.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
}

/// The name of an errno number (1 → "EPERM"); "E<n>" if unknown.
pub fn name(errno: i32) -> String {
    ERRNOS
        .iter()
        .find(|&&(_, v)| v == errno)
        .map(|(n, _)| (*n).to_string())
        .unwrap_or_else(|| format!("E{errno}"))
}
