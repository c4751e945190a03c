// The shims are header-only; see include/archive_shims.h.
