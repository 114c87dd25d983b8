// Where `tracegate serve` keeps its compile cache (bin/compile-cache.ts). What serve does with it, seen from outside
// the process, is in test/config/compile-cache.test.ts.
import { expect } from 'chai';
import { join } from 'node:path';
import { compileCacheDir } from '../../../bin/compile-cache.ts';

describe('serve: the compile cache', () => {
  it("compileCacheDir: the given directory, else the data dir's; none when Node's own switch turns it off", () => {
    expect(compileCacheDir('/d', {})).to.equal('/d/cache/compile');
    expect(compileCacheDir('data', {})).to.equal(join(process.cwd(), 'data/cache/compile'));
    expect(compileCacheDir('/d', { NODE_COMPILE_CACHE: '/c' })).to.equal('/c');
    expect(compileCacheDir('/d', { NODE_DISABLE_COMPILE_CACHE: '1', NODE_COMPILE_CACHE: '/c' })).to.equal(null);
  });
});
