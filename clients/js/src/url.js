// Request URLs: a subscription path (`/ws`, `/sse`, `/poll`, each with the user's id
// when there is one) and its query. Channel names go in the query percent-encoded (the
// server decodes query values); in a path they go as they are, since every character a
// name may hold is allowed in a path segment.

/** `base` (http or https, maybe with a path prefix) + `path` + the query of `params`. */
export function httpUrl(base, path, params = []) {
  const query = params
    .filter(([, v]) => v !== undefined && v !== null && v !== "")
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join("&");
  return base.replace(/\/+$/, "") + path + (query ? `?${query}` : "");
}

/** The same URL with `ws:`/`wss:` for `http:`/`https:`. */
export function wsUrl(base, path, params) {
  return httpUrl(base, path, params).replace(/^http/, "ws");
}

/** `/<kind>` or `/<kind>/<user>`. */
export function subscriptionPath(kind, user) {
  return user === undefined || user === null ? `/${kind}` : `/${kind}/${user}`;
}
