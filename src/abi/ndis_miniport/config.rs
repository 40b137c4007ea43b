//! Registry configuration: `NDIS_CONFIGURATION_OBJECT`,
//! `NDIS_CONFIGURATION_PARAMETER` and the strings and binary data they carry.

use core::ffi::c_void;

use super::enums::NdisParameterType;
use crate::abi::NdisObjectHeader;
use crate::abi::types::NdisHandle;

/// `UNICODE_STRING` (= `NDIS_STRING`) [H ntdef.h; layout PDB], 0x10 bytes.
/// Lengths are in bytes, not characters.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UnicodeString {
    /// `Length`: bytes of text, without a terminator.
    pub length: u16,
    /// `MaximumLength`: bytes of the buffer.
    pub maximum_length: u16,
    /// Padding in C.
    pub padding_04: u32,
    /// `Buffer`: UTF-16 code units.
    pub buffer: *const u16,
}

/// `NDIS_CONFIGURATION_OBJECT` [H ndis.h; layout computed], 0x18 bytes (the
/// revision-1 size through `Flags` is 0x14).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdisConfigurationObject {
    /// `Header`: {[`NDIS_OBJECT_TYPE_CONFIGURATION_OBJECT`],
    /// [`NDIS_CONFIGURATION_OBJECT_REVISION_1`],
    /// [`NDIS_SIZEOF_CONFIGURATION_OBJECT_REVISION_1`]}.
    pub header: NdisObjectHeader,
    /// Padding in C.
    pub padding_04: u32,
    /// `NdisHandle`: the miniport adapter handle.
    pub ndis_handle: NdisHandle,
    /// `Flags`: 0.
    pub flags: u32,
    /// Tail padding in C.
    pub padding_14: u32,
}

/// `BINARY_DATA` [H ndis.h; layout computed], 0x10 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BinaryData {
    /// `Length`.
    pub length: u16,
    /// Padding in C.
    pub padding_02: [u16; 3],
    /// `Buffer`.
    pub buffer: *mut c_void,
}

/// `NDIS_CONFIGURATION_PARAMETER.ParameterData` [H ndis.h; layout computed].
#[repr(C)]
#[derive(Clone, Copy)]
pub union NdisConfigurationParameterData {
    /// `IntegerData`.
    pub integer_data: u32,
    /// `StringData`.
    pub string_data: UnicodeString,
    /// `BinaryData`.
    pub binary_data: BinaryData,
}

/// `NDIS_CONFIGURATION_PARAMETER` [H ndis.h; layout computed], 0x18 bytes:
/// what `NdisReadConfiguration` returns (NDIS owns it).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NdisConfigurationParameter {
    /// `ParameterType`: which member of `parameter_data` is valid.
    pub parameter_type: NdisParameterType,
    /// Padding in C.
    pub padding_04: u32,
    /// `ParameterData`.
    pub parameter_data: NdisConfigurationParameterData,
}

assert_layouts! {
    layout_unicode_string: UnicodeString, size 0x10, align 8 {
        length: 0x0, maximum_length: 0x2, buffer: 0x8,
    }
    layout_ndis_configuration_object: NdisConfigurationObject, size 0x18, align 8 {
        header: 0x00, ndis_handle: 0x08, flags: 0x10,
    }
    layout_binary_data: BinaryData, size 0x10, align 8 { length: 0x0, buffer: 0x8 }
    layout_ndis_configuration_parameter: NdisConfigurationParameter, size 0x18, align 8 {
        parameter_type: 0x0, parameter_data: 0x8,
    }
}

/// `NDIS_OBJECT_TYPE_CONFIGURATION_OBJECT` (0xA9).
pub const NDIS_OBJECT_TYPE_CONFIGURATION_OBJECT: u8 = 0xA9;

/// `NDIS_CONFIGURATION_OBJECT_REVISION_1`.
pub const NDIS_CONFIGURATION_OBJECT_REVISION_1: u8 = 1;
/// `NDIS_SIZEOF_CONFIGURATION_OBJECT_REVISION_1`: through `Flags`.
pub const NDIS_SIZEOF_CONFIGURATION_OBJECT_REVISION_1: u16 = 0x14;

assert_ndis_sizeof! {
    NDIS_SIZEOF_CONFIGURATION_OBJECT_REVISION_1 => NdisConfigurationObject { flags: u32 },
}
