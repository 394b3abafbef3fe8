// @myriad/client: see README.md and index.d.ts.
export { MyriadClient } from "./src/client.js";
