use crate::error::{CoreError, Problem};

/// A turn's role; the discriminant is its byte in the canonical encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Role {
    System = 1,
    User = 2,
    Assistant = 3,
    Tool = 4,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::System, Role::User, Role::Assistant, Role::Tool];

    pub fn parse(value: &str) -> Result<Self, CoreError> {
        Ok(match value {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            _ => {
                return Err(CoreError::invalid(
                    "role",
                    Problem::UnknownValue,
                    "must be one of 'system', 'user', 'assistant', 'tool'",
                ))
            }
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    pub fn code(self) -> u8 {
        self as u8
    }
}

/// Why a turn is protected; the discriminant is its byte in the canonical encoding (none = 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ProtectionReason {
    PendingConfirmation = 1,
    ActiveConstraint = 2,
    AuditEvidence = 3,
    UnverifiedProvenance = 4,
}

impl ProtectionReason {
    pub const ALL: [ProtectionReason; 4] = [
        ProtectionReason::PendingConfirmation,
        ProtectionReason::ActiveConstraint,
        ProtectionReason::AuditEvidence,
        ProtectionReason::UnverifiedProvenance,
    ];

    pub fn parse(value: &str) -> Result<Self, CoreError> {
        Ok(match value {
            "pending-confirmation" => ProtectionReason::PendingConfirmation,
            "active-constraint" => ProtectionReason::ActiveConstraint,
            "audit-evidence" => ProtectionReason::AuditEvidence,
            "unverified-provenance" => ProtectionReason::UnverifiedProvenance,
            _ => {
                return Err(CoreError::invalid(
                    "protection_reason",
                    Problem::UnknownValue,
                    "must be one of 'pending-confirmation', 'active-constraint', \
                     'audit-evidence', 'unverified-provenance', or None",
                ))
            }
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProtectionReason::PendingConfirmation => "pending-confirmation",
            ProtectionReason::ActiveConstraint => "active-constraint",
            ProtectionReason::AuditEvidence => "audit-evidence",
            ProtectionReason::UnverifiedProvenance => "unverified-provenance",
        }
    }

    pub fn code(self) -> u8 {
        self as u8
    }
}

/// Field rules of SPEC §2 that do not depend on the host language.
pub fn validate_id(field: &'static str, id: &str) -> Result<(), CoreError> {
    if id.is_empty() {
        return Err(CoreError::invalid(
            field,
            Problem::Empty,
            "must be a non-empty string",
        ));
    }
    Ok(())
}

pub fn validate_sequence(sequence: i64) -> Result<(), CoreError> {
    if sequence < 0 {
        return Err(CoreError::invalid(
            "sequence",
            Problem::OutOfRange,
            "must be >= 0",
        ));
    }
    Ok(())
}

pub fn validate_protection(
    protected: bool,
    reason: Option<ProtectionReason>,
) -> Result<(), CoreError> {
    if reason.is_some() && !protected {
        return Err(CoreError::invalid(
            "protection_reason",
            Problem::NotAllowed,
            "only allowed when protected=True",
        ));
    }
    Ok(())
}

pub fn validate_group(group: Option<&str>) -> Result<(), CoreError> {
    if group == Some("") {
        return Err(CoreError::invalid(
            "group",
            Problem::Empty,
            "must be non-empty when given",
        ));
    }
    Ok(())
}

/// Sorts meta entries by the UTF-8 bytes of their keys (the encoding order) and rejects
/// empty or repeated keys.
pub fn normalise_meta(entries: &mut [(String, String)]) -> Result<(), CoreError> {
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    for (index, (key, _)) in entries.iter().enumerate() {
        if key.is_empty() {
            return Err(CoreError::invalid(
                "meta",
                Problem::Empty,
                "keys must be non-empty",
            ));
        }
        if index > 0 && entries[index - 1].0 == *key {
            return Err(CoreError::invalid(
                "meta",
                Problem::Duplicate,
                "keys must be unique",
            ));
        }
    }
    Ok(())
}
