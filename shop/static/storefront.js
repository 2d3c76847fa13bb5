// The storefront's live view: which of the page's optional sections the
// controller dims for this visitor right now, evaluated in the browser
// with OpenFeature's web SDK and its OFREP web provider (vendored:
// vendor/VERSIONS) at the OFREP base URL the page names in data-ofrep —
// the shop's own origin when it embeds the controller, the daemon's in
// fleet mode (another origin, which must allow this page's: brownoutd
// --cors-origin).
//
// Each <section data-feature> gets data-live "on" or "dimmed" and, where
// the server's rendering no longer matches, a line that says so; <body>
// gets data-live-state "loading", "ready", "stale" or "error", and #live
// says it in words. Where the flags cannot be evaluated (the daemon
// refuses this origin, or is away) the SDK answers each flag's default:
// on, as the shop's flags fail open.

import { OpenFeature, ProviderEvents } from '@openfeature/web-sdk';
import { OFREPWebProvider } from '@openfeature/ofrep-web-provider';

// DEFAULT_ON is a section's flag default: on, what the shop shows
// without a controller (the features' default in brownoutd).
const DEFAULT_ON = true;
// POLL_MS is how often to re-fetch when the event stream the daemon
// advertises cannot be followed (a proxy that buffers it, a daemon that
// wants a token on it): a level change shows within ten seconds.
const POLL_MS = 10_000;
// TIMEOUT_MS bounds one evaluation request: the page says it cannot
// reach the controller rather than wait.
const TIMEOUT_MS = 5_000;

const body = document.body;
const base = (body.dataset.ofrep || location.origin).replace(/\/+$/, '');
const sections = [...document.querySelectorAll('section[data-feature]')];
const status = document.getElementById('live');
const client = OpenFeature.getClient();

// show renders the flags as the SDK answers them now; state is the
// provider's, detail what went wrong.
function show(state, detail) {
  body.dataset.liveState = state;
  const dimmed = [];
  for (const s of sections) {
    const name = s.dataset.feature;
    const on = client.getBooleanValue(name, DEFAULT_ON);
    s.dataset.live = on ? 'on' : 'dimmed';
    s.classList.toggle('live-dimmed', !on);
    if (!on) dimmed.push(name);
    const servedDimmed = s.dataset.served === 'dimmed';
    const line = s.querySelector('.live');
    line.textContent = on && servedDimmed ? 'Back on now: reload the page to see it.'
      : !on && !servedDimmed ? 'Dimmed now: the site got busy since this page was served.' : '';
    line.hidden = line.textContent === '';
  }
  const list = dimmed.length ? dimmed.join(', ') + ' dimmed for you' : 'nothing dimmed for you';
  switch (state) {
    case 'loading':
      status.textContent = 'Live levels: asking ' + base + '…';
      break;
    case 'ready':
      status.textContent = 'Live levels from ' + base + ': ' + list + '.';
      break;
    case 'stale':
      status.textContent = 'Live levels from ' + base + ', maybe out of date (' + detail + '): ' + list + '.';
      break;
    default:
      status.textContent = 'Live levels unavailable from ' + base + ' (' + (detail || 'no answer') +
        '): showing the defaults, every section on. Reload to try again.';
  }
}

show('loading');
OpenFeature.addHandler(ProviderEvents.Ready, () => show('ready'));
OpenFeature.addHandler(ProviderEvents.ConfigurationChanged, () => show('ready'));
OpenFeature.addHandler(ProviderEvents.Stale, (e) => show('stale', e && e.message));
OpenFeature.addHandler(ProviderEvents.Error, (e) => show('error', e && e.message));
// No stored answers (cacheMode 'disabled'): the page shows the levels of
// now, never those of an earlier visit.
try {
  await OpenFeature.setProviderAndWait(
    new OFREPWebProvider({ baseUrl: base, pollInterval: POLL_MS, timeoutMs: TIMEOUT_MS, cacheMode: 'disabled' }),
    { targetingKey: body.dataset.targetingKey });
  show('ready');
} catch (e) {
  show('error', e && (e.cause && e.cause.message || e.message));
}
