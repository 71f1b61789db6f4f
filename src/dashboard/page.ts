import type { DashboardRole } from './handler-options.js';
import { CSRF_HEADER } from './security.js';

/**
 * The dashboard's one HTML page: a shell that loads the stylesheets and scripts from its `assets/`
 * (no inline script or style). The scripts pick the view from the path, read the JSON endpoints
 * and render with `textContent` only, so no value from the database is ever parsed as HTML. The
 * CSRF token, the role and the base path ride in data attributes for the page's own requests.
 */
export function dashboardPage(options: { csrfToken: string; role: DashboardRole; basePath: string }): string {
  // The token is base64url, the role one of two words and the base path unreserved characters
  // (checked by checkHandlerOptions): none can break out of an attribute.
  const base = options.basePath;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Leasehold</title>
<link rel="stylesheet" href="${base}/assets/uPlot.min.css">
<link rel="stylesheet" href="${base}/assets/app.css">
<script src="${base}/assets/uPlot.iife.min.js" defer></script>
<script type="module" src="${base}/assets/app.js"></script>
</head>
<body data-csrf="${options.csrfToken}" data-csrf-header="${CSRF_HEADER}" data-role="${options.role}" data-base="${base}">
<a class="skip" href="#main">Skip to content</a>
<header><strong>Leasehold</strong>
<nav aria-label="Views"><a href="${base}/">Queues</a> <a href="${base}/search">Search</a> <a href="${base}/dead">Dead jobs</a> <a href="${base}/enqueue">Enqueue</a></nav>
<span id="role" class="role">${options.role === 'viewer' ? 'read-only' : ''}</span>
<span id="status" role="status" aria-live="polite"></span></header>
<main id="main" tabindex="-1"></main>
</body>
</html>`;
}
