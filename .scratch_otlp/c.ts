import { expect } from 'chai';
const a = Object.assign(Object.create(null), { x: 1, y: { z: 2 } });
try { expect(a).to.deep.equal({ x: 1, y: { z: 2 } }); console.log('deep equal ok'); } catch (e) { console.log('fail', (e as Error).message); }
