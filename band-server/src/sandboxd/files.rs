//! The REST API on :8080: `/v1/files/{path}` (GET a file or a folder's listing, HEAD whether it
//! exists, PUT its contents, DELETE it), `/v1/health` and `/v1/metadata`; every route behind the
//! token. A path is workspace-relative; one with `..`, `.`, an empty component, a leading `/`
//! (after the route's own), `.git`, or a symlink on it is refused, and a file the pod's band does
//! not admit (`allow.read` or `allow.write`, no `deny` over it) is neither read nor written:
//! what the API shows and takes is what a run sees. Every access goes through
//! `band::client::workspace::WorkspaceRoot` (one component at a time beneath the workspace's
//! descriptor, never through a link; writes made under a temporary name and renamed).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rustix::fs::FileType;
use serde_json::json;

use super::Pod;

/// The largest file the API reads or takes.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

pub fn router(pod: Arc<Pod>) -> Router {
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/metadata", get(metadata))
        .route("/v1/files", get(list_root))
        .route("/v1/files/", get(list_root))
        .route("/v1/files/{*path}", get(read).put(write).delete(remove))
        .layer(DefaultBodyLimit::max(MAX_FILE_BYTES as usize))
        .layer(middleware::from_fn_with_state(pod.clone(), auth))
        .with_state(pod)
}

async fn auth(State(pod): State<Arc<Pod>>, req: Request, next: Next) -> Response {
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    if pod.token.admits(header) {
        next.run(req).await
    } else {
        error(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "a token is required (authorization: Bearer <token>)",
        )
    }
}

fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    (
        status,
        axum::Json(json!({"code": code, "message": message.into()})),
    )
        .into_response()
}

/// band's version, the wire protocol's, and the pod's band.
fn band_info(pod: &Pod) -> serde_json::Value {
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "protocol": band::proto::PROTOCOL_VERSION,
        "policy_sha256": pod.policy_sha256,
        "band_file": pod.band.display().to_string(),
    })
}

async fn health(State(pod): State<Arc<Pod>>) -> Response {
    axum::Json(json!({
        "status": "ok",
        "uptime_seconds": pod.started.elapsed().as_secs(),
        "band": band_info(&pod),
    }))
    .into_response()
}

async fn metadata(State(pod): State<Arc<Pod>>) -> Response {
    // sandboxd's metadata is the pod's `SANDBOX_`-prefixed environment; band-sandboxd passes no
    // environment to runs, so it has none to show.
    axum::Json(json!({"env": {}, "band": band_info(&pod)})).into_response()
}

/// The workspace-relative path of a request, or the refusal.
fn rel_of(raw: &str) -> Result<String, Box<Response>> {
    let rel = raw.strip_suffix('/').unwrap_or(raw);
    if rel.is_empty() || rel == "." {
        return Ok(String::new());
    }
    band::client::workspace::api_path(rel)
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(|m| Box::new(error(StatusCode::BAD_REQUEST, "invalid_path", m)))
}

fn not_admitted(rel: &str) -> Response {
    error(
        StatusCode::FORBIDDEN,
        "not_admitted",
        format!(
            "`{rel}`: the pod's band does not admit it (allow.read or allow.write); a run would not see it"
        ),
    )
}

fn failed(e: band::client::ClientError) -> Response {
    let text = e.to_string();
    if text.contains("symlink") {
        error(StatusCode::FORBIDDEN, "symlink", text)
    } else if matches!(e, band::client::ClientError::User { .. }) {
        error(StatusCode::BAD_REQUEST, "invalid_path", text)
    } else {
        error(StatusCode::INTERNAL_SERVER_ERROR, "io", text)
    }
}

fn rfc3339(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

async fn list_root(State(pod): State<Arc<Pod>>) -> Response {
    listing(pod, String::new()).await
}

async fn listing(pod: Arc<Pod>, rel: String) -> Response {
    let listed = {
        let pod = pod.clone();
        let rel = rel.clone();
        tokio::task::spawn_blocking(move || pod.workspace.list(&rel)).await
    };
    match listed {
        Ok(Ok(Some(entries))) => {
            let shown: Vec<serde_json::Value> = entries
                .into_iter()
                .filter(|e| {
                    let path = if rel.is_empty() {
                        e.name.clone()
                    } else {
                        format!("{rel}/{}", e.name)
                    };
                    // A folder is listed (something below it may be admitted); a file only if
                    // admitted.
                    e.dir || pod.admits(&path)
                })
                .map(|e| {
                    json!({
                        "name": e.name,
                        "size": e.size,
                        "type": if e.dir { "directory" } else { "file" },
                        "modified_at": rfc3339(e.modified),
                        "mode": format!("{:04o}", e.mode),
                    })
                })
                .collect();
            axum::Json(json!({"path": rel, "entries": shown})).into_response()
        }
        Ok(Ok(None)) => error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("`{rel}`: no such folder"),
        ),
        Ok(Err(e)) => failed(e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
    }
}

async fn read(State(pod): State<Arc<Pod>>, Path(raw): Path<String>) -> Response {
    let rel = match rel_of(&raw) {
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    let kind = {
        let pod = pod.clone();
        let rel = rel.clone();
        tokio::task::spawn_blocking(move || pod.workspace.kind(&rel))
            .await
            .ok()
            .flatten()
    };
    if kind == Some(FileType::Directory) {
        return listing(pod, rel).await;
    }
    if !pod.admits(&rel) {
        return not_admitted(&rel);
    }
    let got = {
        let pod = pod.clone();
        let rel = rel.clone();
        tokio::task::spawn_blocking(move || pod.workspace.read_file(&rel, MAX_FILE_BYTES)).await
    };
    match got {
        Ok(Ok(Some(data))) => {
            let mut headers = HeaderMap::new();
            headers.insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/octet-stream"),
            );
            (headers, data).into_response()
        }
        Ok(Ok(None)) => error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("`{rel}`: no such file"),
        ),
        Ok(Err(e)) => failed(e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
    }
}

async fn write(State(pod): State<Arc<Pod>>, Path(raw): Path<String>, body: Bytes) -> Response {
    let rel = match rel_of(&raw) {
        Ok(r) if r.is_empty() => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_path",
                "the workspace itself is not a file",
            );
        }
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    if !pod.admits(&rel) {
        return not_admitted(&rel);
    }
    let wrote = {
        let pod = pod.clone();
        let rel = rel.clone();
        tokio::task::spawn_blocking(move || pod.workspace.write_file(&rel, &body)).await
    };
    match wrote {
        Ok(Ok(())) => StatusCode::NO_CONTENT.into_response(),
        Ok(Err(e)) => failed(e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
    }
}

async fn remove(State(pod): State<Arc<Pod>>, Path(raw): Path<String>) -> Response {
    let rel = match rel_of(&raw) {
        Ok(r) if r.is_empty() => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_path",
                "the workspace itself is not removed",
            );
        }
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    if !pod.admits(&rel) {
        return not_admitted(&rel);
    }
    let removed = {
        let pod = pod.clone();
        let rel = rel.clone();
        tokio::task::spawn_blocking(move || pod.workspace.remove(&rel)).await
    };
    match removed {
        Ok(Ok(true)) => StatusCode::NO_CONTENT.into_response(),
        Ok(Ok(false)) => error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("`{rel}`: nothing there"),
        ),
        Ok(Err(e)) => failed(e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
    }
}
