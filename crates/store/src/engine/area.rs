//! `store_area!`: an area's public store trait and its one implementation, for
//! [`Engine`](super::Engine), from each method written once.

/// Declares the public store trait of an area and implements it for
/// [`Engine<D>`](super::Engine) over the driver bounds given, from methods written
/// once with their docs and bodies:
///
/// ```ignore
/// store_area! {
///     /// The trait's docs.
///     pub trait SendStore for Engine<D: SendStatements> {
///         /// A method's docs.
///         async fn room(&self, tenant: TenantId, key: &str) -> StoreResult<Room> {
///             self.0.load_room(None, tenant, key).await
///         }
///     }
/// }
/// ```
///
/// It emits what was written by hand before: `#[async_trait] pub trait SendStore:
/// Send + Sync` with each method's signature and docs, and `#[async_trait] impl<D:
/// SendStatements> SendStore for Engine<D>` with the bodies. A method is `async fn`
/// or a plain `fn`; each has a return type. A method the trait provides and the
/// engine does not override is written `default async fn`, with the trait's body.
/// Long driver bounds wrap as rustfmt wraps generics: `Engine<`, then the bounds on a
/// line of their own with a trailing comma, then `>`. rustfmt leaves what is inside
/// the braces alone: keep it formatted as rustfmt would, within 100 columns.
macro_rules! store_area {
    (
        $(#[$attr:meta])*
        pub trait $area:ident for Engine<D: $bound:ident $(+ $more:ident)* $(,)?> {
            $($methods:tt)*
        }
    ) => {
        $crate::engine::area::store_area!(
            @split [$(#[$attr])* $area [$bound $(+ $more)*]] [] [] $($methods)*
        );
    };
    // Every method split: the trait and the impl. A method's parameters pass through
    // as the one token tree they are (`$args`), so the `self` of its body and of its
    // `&self` come from the same place (a `self` the macro wrote would not be the
    // body's).
    (
        @split [$(#[$attr:meta])* $area:ident [$($bounds:tt)+]]
        [$($decl:tt)*] [$($def:tt)*]
    ) => {
        $(#[$attr])*
        #[::async_trait::async_trait]
        pub trait $area: Send + Sync {
            $($decl)*
        }

        #[::async_trait::async_trait]
        impl<D: $($bounds)+> $area for $crate::engine::Engine<D> {
            $($def)*
        }
    };
    (
        @split $head:tt [$($decl:tt)*] [$($def:tt)*]
        $(#[$meta:meta])*
        async fn $name:ident $args:tt -> $ret:ty { $($body:tt)* }
        $($rest:tt)*
    ) => {
        $crate::engine::area::store_area!(
            @split $head
            [$($decl)* $(#[$meta])* async fn $name $args -> $ret;]
            [$($def)* async fn $name $args -> $ret { $($body)* }]
            $($rest)*
        );
    };
    // A method the trait provides, which the engine does not override.
    (
        @split $head:tt [$($decl:tt)*] [$($def:tt)*]
        $(#[$meta:meta])*
        default async fn $name:ident $args:tt -> $ret:ty { $($body:tt)* }
        $($rest:tt)*
    ) => {
        $crate::engine::area::store_area!(
            @split $head
            [$($decl)* $(#[$meta])* async fn $name $args -> $ret { $($body)* }]
            [$($def)*]
            $($rest)*
        );
    };
    (
        @split $head:tt [$($decl:tt)*] [$($def:tt)*]
        $(#[$meta:meta])*
        fn $name:ident $args:tt -> $ret:ty { $($body:tt)* }
        $($rest:tt)*
    ) => {
        $crate::engine::area::store_area!(
            @split $head
            [$($decl)* $(#[$meta])* fn $name $args -> $ret;]
            [$($def)* fn $name $args -> $ret { $($body)* }]
            $($rest)*
        );
    };
}

pub(crate) use store_area;
