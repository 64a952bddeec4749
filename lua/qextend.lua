#!lua
-- QEXTEND leasekey member ms
--
-- KEYS[1]  the lease set (a sorted set of member -> deadline in ms)
-- ARGV[1]  the member
-- ARGV[2]  ms, a positive integer
--
-- If the member is in the lease set (its deadline may have passed, as long
-- as no QRECLAIM has taken it back), sets its deadline to server time + ms.
-- Reply: 1 if extended, 0 if the member is not leased.

--#include lib/err.lua
--#include lib/int.lua
--#include lib/time.lua
--#include lib/zline.lua
--#include lib/qextend.lua
