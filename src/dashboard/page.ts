import { CSRF_HEADER } from './security.js';

/**
 * The dashboard's one HTML page: a shell that loads the stylesheets and scripts from `/assets/`
 * (no inline script or style). The scripts pick the view from the path, read the JSON endpoints
 * and render with `textContent` only, so no value from the database is ever parsed as HTML. The
 * CSRF token and the role ride in data attributes for the page's own POSTs.
 */
export function dashboardPage(options: { csrfToken: string; role: 'operator' | 'viewer' }): string {
  // The token is base64url and the role one of two words: neither can break out of the attribute.
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Leasehold</title>
<link rel="stylesheet" href="/assets/uPlot.min.css">
<link rel="stylesheet" href="/assets/app.css">
<script src="/assets/uPlot.iife.min.js" defer></script>
<script type="module" src="/assets/app.js"></script>
</head>
<body data-csrf="${options.csrfToken}" data-csrf-header="${CSRF_HEADER}" data-role="${options.role}">
<a class="skip" href="#main">Skip to content</a>
<header><strong>Leasehold</strong>
<nav aria-label="Views"><a href="/">Queues</a> <a href="/search">Search</a> <a href="/dead">Dead jobs</a> <a href="/enqueue">Enqueue</a></nav>
<span id="role" class="role">${options.role === 'viewer' ? 'read-only' : ''}</span>
<span id="status" role="status" aria-live="polite"></span></header>
<main id="main" tabindex="-1"></main>
</body>
</html>`;
}
