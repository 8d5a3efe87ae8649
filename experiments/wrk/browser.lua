-- wrk script: a browser-like request head (~600 bytes of typical Chrome
-- headers) instead of wrk's two-line default, so the parser and the WSGI
-- environ see what a real client sends.
wrk.headers["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
wrk.headers["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
wrk.headers["Accept-Language"] = "en-GB,en-US;q=0.9,en;q=0.8"
wrk.headers["Accept-Encoding"] = "gzip, deflate, br"
wrk.headers["Cache-Control"] = "max-age=0"
wrk.headers["Sec-Ch-Ua"] = "\"Chromium\";v=\"120\", \"Not?A_Brand\";v=\"8\""
wrk.headers["Sec-Ch-Ua-Mobile"] = "?0"
wrk.headers["Sec-Ch-Ua-Platform"] = "\"Linux\""
wrk.headers["Sec-Fetch-Dest"] = "document"
wrk.headers["Sec-Fetch-Mode"] = "navigate"
wrk.headers["Sec-Fetch-Site"] = "none"
wrk.headers["Sec-Fetch-User"] = "?1"
wrk.headers["Upgrade-Insecure-Requests"] = "1"
wrk.headers["Cookie"] = "sessionid=3f9a1c2b7d4e5f60718293a4b5c6d7e8; csrftoken=Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0F"
