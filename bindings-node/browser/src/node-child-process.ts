/* `node:child_process` in the browser build: a page cannot start processes, so the
   subprocess adapter's spawn fails with this error (the rest of the adapter seam, the
   SubprocessTurnMachine included, works). */
export function spawn(): never {
  throw new Error('stapel-runner-protocol/browser: SubprocessAdapter needs Node.js (node:child_process); a page cannot start a harness');
}
