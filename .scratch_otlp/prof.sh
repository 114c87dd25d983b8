rm -f *.cpuprofile
node --cpu-prof "$@" > /dev/null
node -e "
const fs=require('fs');const f=fs.readdirSync('.').find(x=>x.endsWith('.cpuprofile'));const p=JSON.parse(fs.readFileSync(f));
const self=new Map();const idIdx=new Map(p.nodes.map((n,i)=>[n.id,n]));
const cnt=new Map();for(const s of p.samples){cnt.set(s,(cnt.get(s)||0)+1)}
for(const [id,c] of cnt){const n=idIdx.get(id);const k=n.callFrame.functionName+' '+n.callFrame.url.split('/').slice(-2).join('/')+':'+n.callFrame.lineNumber;self.set(k,(self.get(k)||0)+c)}
console.log([...self].sort((a,b)=>b[1]-a[1]).slice(0,30).map(x=>x[1]+' '+x[0]).join('\n'))"
