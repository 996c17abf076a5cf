// Drives the dashboard in headless Chromium (playwright-core, Debian's /usr/bin/chromium):
// waits for live throughput figures, sees them change, switches the policy through the page's
// form and waits for the page to report the step; saves a screenshot. Prints a JSON line.
// usage: node dashboard_browser.cjs URL SCREENSHOT POLICY CREDIT
'use strict';
const {chromium} = require('playwright-core');

async function main() {
  const [url, screenshot, policy, credit] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage({viewport: {width: 1400, height: 900}});
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(url, {timeout: 15000});
    const figure = async () => (await page.textContent('#total-ips')).replace(/,/g, '');
    await page.waitForFunction(() => Number(document.getElementById('total-ips').textContent.replace(/,/g, '')) > 0,
                               null, {timeout: 20000});
    const first = await figure();
    await page.waitForFunction((v) => {
      const now = document.getElementById('total-ips').textContent.replace(/,/g, '');
      return Number(now) > 0 && now !== v;
    }, first, {timeout: 15000});
    const second = await figure();
    await page.selectOption('#policy-select', policy);
    await page.fill('#credit', credit);
    await page.click('#apply');
    await page.waitForFunction(() => /took effect at step \d+|refused|no answer/.test(
                                   document.getElementById('switch-result').textContent), null, {timeout: 40000});
    const result = await page.textContent('#switch-result');
    // A few more samples, so the chart shows throughput on both sides of the switch mark.
    await page.waitForTimeout(2500);
    const charts = await page.locator('canvas').count();
    const policyNow = await page.textContent('#policy-now');
    await page.screenshot({path: screenshot, fullPage: true});
    console.log(JSON.stringify({first, second, result, policyNow, charts, errors}));
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  console.error('browser test: ' + e.message);
  process.exit(1);
});
