// @ts-check
// The server's one background job (GET api/model/analysis: the verdict, patching, eviction),
// followed until it ends. Each panel that starts one keeps the job it follows in its part of
// the store; a job another panel started since replaces it, and the follower says so.

import { api, messageOf } from './api.js';

/** The panels following now, by the job's kind of holder: one loop each. @type {Set<string>} */
const following = new Set();

/**
 * Polls the job every 150 ms while `read()` says it runs, writing each view with `write`;
 * then `say` gets the end ('' when done, 'cancelled', or 'failed: …' as an error).
 * @param {string} holder  which panel follows (one loop per panel)
 * @param {() => any} read  the job the panel holds now
 * @param {(job: any) => void} write
 * @param {(text: string, error?: boolean) => void} say
 */
export async function followJob(holder, read, write, say) {
  if (following.has(holder)) return;
  following.add(holder);
  try {
    for (let job = read(); job && job.state === 'running'; job = read()) {
      await new Promise((resolve) => setTimeout(resolve, 150));
      const now = await api('api/model/analysis');
      if (now.id !== job.id) {  // another panel started a job: this one was replaced
        write({ ...job, state: 'cancelled' });
        break;
      }
      write(now);
    }
    const job = read();
    if (job) say(job.state === 'failed' ? `failed: ${job.error}` : job.state === 'cancelled' ? 'cancelled' : '', job.state === 'failed');
  } catch (e) {
    say(messageOf(e), true);
  } finally {
    following.delete(holder);
  }
}
