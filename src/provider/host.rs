//! Host mode: the C entry points of the user-mode library.
