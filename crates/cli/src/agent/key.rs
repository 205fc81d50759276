//! `switchboard agent key`: the Ed25519 key the profile's requests are signed with
//! (RFC 9421; issue 39). A device login makes one by itself; a static token gets
//! one here (`register`, audited on the server). Once a credential has a key the
//! server refuses its unsigned requests, so a stolen token alone is useless. The
//! private key stays in the OS keyring next to the token; only its public half
//! (a JWK) goes to the server.

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use switchboard_sdk::TokenStore;
use switchboard_sdk::signing::SigningKey;

use super::Common;

#[derive(Args, Debug)]
pub(crate) struct KeyArgs {
    #[command(subcommand)]
    command: KeyCommand,
}

#[derive(Subcommand, Debug)]
enum KeyCommand {
    /// Make a key and bind it to this profile's credential (a static token; a
    /// device login has one already). From then on every request is signed.
    Register,
    /// Replace the key while agents run: the new key is registered by a request
    /// signed with the current one, then the current one is revoked.
    Rotate,
    /// This profile's key id (its RFC 7638 thumbprint) and the keys the server has
    /// for the credential, one JSON object per line.
    Show,
}

pub(crate) async fn run(common: &Common, args: KeyArgs) -> anyhow::Result<u8> {
    let store = key_store()?;
    let client = common.connected_client().await?;
    match args.command {
        KeyCommand::Register => {
            if let Some(held) = client.signing_key_id() {
                bail!(
                    "profile {:?} signs with the key {held} already; replace it with \
                     `switchboard agent key rotate`",
                    common.profile
                );
            }
            let key = SigningKey::generate();
            // Saved first: a key the server binds while this process dies before
            // saving it would lock the credential out.
            save(&store, common, &key)?;
            let view = client
                .register_key(&key.public_key())
                .await
                .context("registering the key")?;
            eprintln!(
                "profile {:?} now signs its requests with the key {} (kept in the {:?} \
                 keyring); the server refuses this credential's unsigned requests from now on",
                common.profile,
                view.jkt,
                store.backend()
            );
            println!("{}", view.jkt);
        }
        KeyCommand::Rotate => {
            let key = client.rotate_key().await.context("rotating the key")?;
            save(&store, common, &key)?;
            let jkt = key.public_key().thumbprint();
            eprintln!("profile {:?} signs with the new key {jkt}", common.profile);
            println!("{jkt}");
        }
        KeyCommand::Show => {
            match client.signing_key_id() {
                Some(jkt) => eprintln!("profile {:?} signs with the key {jkt}", common.profile),
                None => eprintln!(
                    "profile {:?} holds no key: it signs nothing",
                    common.profile
                ),
            }
            for key in client.keys().await.context("listing the keys")? {
                println!("{}", serde_json::to_string(&key)?);
            }
        }
    }
    Ok(0)
}

/// The keyring the profile's key is kept in: a login from the environment
/// (`SWITCHBOARD_TOKEN`) has none.
fn key_store() -> anyhow::Result<TokenStore> {
    if switchboard_sdk::credentials::from_env()?.is_some() {
        bail!(
            "the login comes from SWITCHBOARD_SERVER and SWITCHBOARD_TOKEN, so there is no \
             keyring profile to keep a key in; log in with `switchboard agent login` first"
        );
    }
    Ok(TokenStore::os()?)
}

fn save(store: &TokenStore, common: &Common, key: &SigningKey) -> anyhow::Result<()> {
    store
        .save_signing_key(&common.profile, key)
        .with_context(|| format!("saving the key of profile {:?}", common.profile))
}
