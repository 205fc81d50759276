//! Identifier newtypes. An `AgentId` cannot be passed where an `EventId` is expected.
//! All ids are UUIDv7 (time-ordered) and serialize as their hyphenated string.
//!
//! With the `sqlx` feature (the store's) each id is also an sqlx `Type`, `Encode`
//! and `Decode` for any database whose text type `String` is: it is stored as the
//! same hyphenated text (`TEXT` on SQLite and PostgreSQL, `VARCHAR(64)` on
//! MariaDB / MySQL), so databases written before keep working. Do *not* change
//! that format: it is on disk.

use std::fmt;
use std::str::FromStr;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(transparent)]
        pub struct $name(pub uuid::Uuid);

        impl $name {
            /// A new time-ordered (UUIDv7) id.
            pub fn new() -> Self {
                Self(uuid::Uuid::now_v7())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                uuid::Uuid::parse_str(s).map(Self)
            }
        }

        #[cfg(feature = "sqlx")]
        impl<DB: sqlx::Database> sqlx::Type<DB> for $name
        where
            String: sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <String as sqlx::Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <String as sqlx::Type<DB>>::compatible(ty)
            }
        }

        #[cfg(feature = "sqlx")]
        impl<'q, DB: sqlx::Database> sqlx::Encode<'q, DB> for $name
        where
            String: sqlx::Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self,
                buf: &mut <DB as sqlx::Database>::ArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                sqlx::Encode::<'q, DB>::encode(self.to_string(), buf)
            }
        }

        #[cfg(feature = "sqlx")]
        impl<'r, DB: sqlx::Database> sqlx::Decode<'r, DB> for $name
        where
            &'r str: sqlx::Decode<'r, DB>,
        {
            fn decode(
                value: <DB as sqlx::Database>::ValueRef<'r>,
            ) -> Result<Self, sqlx::error::BoxDynError> {
                let text = <&'r str as sqlx::Decode<'r, DB>>::decode(value)?;
                text.parse()
                    .map_err(|_| format!("stored id {text:?} is not a UUID").into())
            }
        }
    };
}

uuid_id!(
    /// A tenant: the unit of isolation (I9).
    TenantId
);
uuid_id!(
    /// An agent: owner of one inbox.
    AgentId
);
uuid_id!(
    /// One inbox event (one delivery to one agent).
    EventId
);
uuid_id!(
    /// A room: an append-only log whose messages fan out to its members.
    RoomId
);
uuid_id!(
    /// The capability minted by a claim. Ack, release and extend must present the
    /// current one; any other is stale.
    ClaimToken
);
uuid_id!(
    /// A memory instance: minted only by the control plane (register or branch).
    MemoryId
);
uuid_id!(
    /// One acquisition of a name + memory lease.
    LeaseId
);
uuid_id!(
    /// A webhook callback registration; also the RFC 9421 `keyid` of its deliveries.
    CallbackId
);
